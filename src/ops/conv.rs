//! TODO family conv

pub fn register(_v: &mut Vec<Box<dyn super::OpSpec>>) {}

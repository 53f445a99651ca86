//! DepthToSpace and SpaceToDepth on NCHW tensors.

use super::{attrs_of, finish};
use crate::graph::{Attr, Attrs, DType, TensorType};
use crate::ops::draft::{random_dims, random_type};
use crate::ops::{
    attr_int, attr_string, check_dtype, dims_of, input, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng,
};
use rand::Rng as _;

use DType::*;

const SPACE_DTYPES: &[DType] = &[F32, F64, F16, I8, U8];

// ---- DepthToSpace / SpaceToDepth ----

/// DepthToSpace (mode DCR or CRD) or SpaceToDepth on NCHW tensors with attribute `blocksize`.
pub struct SpaceDepth {
    pub(super) to_space: bool,
}

impl SpaceDepth {
    fn fits(&self, s: &[usize], b: usize) -> bool {
        s.len() == 4
            && if self.to_space { s[1].is_multiple_of(b * b) } else { s[2].is_multiple_of(b) && s[3].is_multiple_of(b) }
    }
}

impl OpSpec for SpaceDepth {
    fn name(&self) -> &'static str {
        if self.to_space {
            "DepthToSpace"
        } else {
            "SpaceToDepth"
        }
    }
    fn arity(&self) -> Arity {
        Arity::fixed(1, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let name = self.name();
        let x = input(ins, 0)?;
        check_dtype(name, x, SPACE_DTYPES)?;
        let xd = dims_of(x, name)?;
        if !attrs.contains_key("blocksize") {
            reject!("{name} needs the attribute 'blocksize'");
        }
        let b = attr_int(attrs, "blocksize", 0)?;
        if !(1..=64).contains(&b) {
            reject!("{name} blocksize {b} is invalid");
        }
        let b = b as usize;
        if self.to_space {
            let mode = attr_string(attrs, "mode", "DCR")?;
            if mode != "DCR" && mode != "CRD" {
                reject!("DepthToSpace mode must be DCR or CRD, got '{mode}'");
            }
        }
        if !self.fits(&xd, b) {
            reject!("{name} with blocksize {b} does not fit {:?}", xd);
        }
        let big = |v: usize, m: usize| v.checked_mul(m).ok_or_else(|| Reject(format!("{name} output is too large")));
        let out = if self.to_space {
            [xd[0], xd[1] / (b * b), big(xd[2], b)?, big(xd[3], b)?]
        } else {
            [xd[0], big(xd[1], b * b)?, xd[2] / b, xd[3] / b]
        };
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let fits = |t: &TensorType| {
            SPACE_DTYPES.contains(&t.dtype) && t.dims().is_some_and(|s| self.fits(&s, 2) || self.fits(&s, 3))
        };
        let x = d.pick_or_input(rng, fits, |r| {
            let b = if r.random_bool(0.8) { 2 } else { 3 };
            let mut dims = random_dims(r, 4, 4, max / (b * b));
            if self.to_space {
                dims[1] *= b * b;
            } else {
                dims[2] *= b;
                dims[3] *= b;
            }
            Some(TensorType::new(random_type(r, SPACE_DTYPES, 0..=0, 1).dtype, &dims))
        })?;
        let xd = x.ty.dims().unwrap();
        let bs: Vec<usize> = [2, 3].into_iter().filter(|&b| self.fits(&xd, b)).collect();
        let b = bs[rng.random_range(0..bs.len())];
        let mut attrs = attrs_of(vec![("blocksize", Attr::Int(b as i64))]);
        if self.to_space && rng.random_bool(0.6) {
            attrs.insert("mode".into(), Attr::str(if rng.random_bool(0.5) { "CRD" } else { "DCR" }));
        }
        finish(self, d, Proposal::new(vec![x.name], attrs))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{a, fact, one};
    use super::*;

    #[test]
    fn depth_space() {
        let b = a(vec![("blocksize", Attr::Int(2)), ("mode", Attr::str("CRD"))]);
        assert_eq!(one("DepthToSpace", &[fact(F32, &[1, 8, 2, 3])], &b).unwrap(), TensorType::new(F32, &[1, 2, 4, 6]));
        assert!(one("DepthToSpace", &[fact(F32, &[1, 6, 2, 3])], &b).is_err());
        let b = a(vec![("blocksize", Attr::Int(2))]);
        assert_eq!(one("SpaceToDepth", &[fact(U8, &[1, 3, 4, 2])], &b).unwrap(), TensorType::new(U8, &[1, 12, 2, 1]));
        assert!(one("SpaceToDepth", &[fact(I32, &[1, 3, 4, 2])], &b).is_err());
        assert!(one("SpaceToDepth", &[fact(F32, &[1, 3, 4, 2])], &Attrs::new()).is_err());
    }
}

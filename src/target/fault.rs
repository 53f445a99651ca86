//! A test-only target that misbehaves on request: a model's metadata `oatest.fault` = `segfault`, `abort`,
//! `hang`, `oom` or `exit` makes the worker do exactly that; otherwise it echoes its inputs as outputs.

use super::{Config, NamedTensor, Outcome, Status, Target};
use crate::graph::onnx::decode_model;

pub struct FaultTarget;

impl Target for FaultTarget {
    fn name(&self) -> &'static str {
        "fault"
    }
    fn version(&self) -> String {
        "test".into()
    }
    fn default_configs(&self) -> Vec<super::Config> {
        vec![Config::level(super::Level::Disable), Config::level(super::Level::All)]
    }
    fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
        let m = match decode_model(model) {
            Ok(m) => m,
            Err(e) => return Outcome::failed(config, Status::Error { message: e.to_string() }, 0.0),
        };
        let fault = m.metadata.iter().find(|(k, _)| k == "oatest.fault").map(|(_, v)| v.as_str());
        // only optimized configurations misbehave, as an optimizer bug would
        if config.level != super::Level::Disable {
            match fault {
                Some("segfault") => unsafe {
                    std::ptr::null_mut::<u64>().write_volatile(1);
                },
                Some("abort") => std::process::abort(),
                Some("hang") => loop {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                },
                Some("oom") => {
                    let mut hog: Vec<Vec<u8>> = Vec::new();
                    loop {
                        hog.push(vec![1u8; 64 << 20]);
                    }
                }
                Some("exit") => std::process::exit(3),
                _ => {}
            }
        }
        Outcome {
            config: config.clone(),
            status: Status::Ok,
            outputs: inputs.to_vec(),
            passes_fired: Vec::new(),
            time_ms: 0.0,
        }
    }
}

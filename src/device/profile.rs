//! Profiles (TF.js's `tf.profile`): what a piece of a program launched.
//!
//! While a profile is taken, each block a flush encodes that launches
//! kernels is recorded as it is encoded: the ops fused into it, the tensors
//! it reads and writes, and the WGSL of each kernel it launched. Taken at
//! the flush, never at replay: a replay runs the same blocks again, split
//! for diagnosis, and is not what the program asked for.

use super::flush::BlockRun;
use super::{Device, DeviceState};
use crate::ir::TensorId;

/// What a profiled piece of a program launched.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// Each block that launched kernels, in launch order.
    pub kernels: Vec<ProfiledKernel>,
    /// `bytesInUse` at the end less at the start (negative when it freed).
    pub new_bytes: i64,
    /// The most bytes tensors held at once while it ran.
    pub peak_bytes: u64,
}

/// One block: the ops fused into it and what it launched.
#[derive(Debug, Clone)]
pub struct ProfiledKernel {
    /// The ops it computes, in order (`matmul`, `add`, `relu`).
    pub ops: Vec<String>,
    /// The tensors it reads, made outside it: id and shape.
    pub inputs: Vec<(TensorId, Vec<usize>)>,
    /// The tensors it writes to memory: id and shape.
    pub outputs: Vec<(TensorId, Vec<usize>)>,
    /// The WGSL of each kernel it launched (two for a reduction split in
    /// two passes).
    pub wgsl: Vec<String>,
}

/// A profile being taken, and the bytes in use when it started.
pub(crate) struct Taking {
    kernels: Vec<ProfiledKernel>,
    bytes_at_start: u64,
}

impl Device {
    /// Runs `f` and everything it queued, and returns what that launched.
    /// The work `f` queued is flushed at the end (as `sync()` flushes:
    /// held expressions nobody read are not computed). Profiles do not nest:
    /// one started inside another ends it.
    pub fn profile<R>(&self, f: impl FnOnce() -> R) -> (R, Profile) {
        self.start_profile();
        let result = f();
        (result, self.end_profile())
    }

    /// Starts recording what flushes launch (`profile` split in two, for a
    /// caller whose `f` is asynchronous).
    pub(crate) fn start_profile(&self) {
        self.with_state(|state| {
            state.flush();
            state.stats.peak_bytes_in_use = state.stats.bytes_in_use;
            state.gpu.traced = Some(Vec::new());
            state.profile = Some(Taking {
                kernels: Vec::new(),
                bytes_at_start: state.stats.bytes_in_use,
            });
        });
    }

    /// Flushes what is queued and returns what was launched since
    /// `start_profile` (an empty profile if none was started).
    pub(crate) fn end_profile(&self) -> Profile {
        self.with_state(|state| {
            state.flush();
            state.gpu.traced = None;
            let Some(taking) = state.profile.take() else {
                return Profile::default();
            };
            // In i128: a difference of two u64 counts, never truncated.
            let change = i128::from(state.stats.bytes_in_use) - i128::from(taking.bytes_at_start);
            Profile {
                kernels: taking.kernels,
                new_bytes: i64::try_from(change).unwrap_or(if change < 0 {
                    i64::MIN
                } else {
                    i64::MAX
                }),
                peak_bytes: state.stats.peak_bytes_in_use,
            }
        })
    }
}

impl DeviceState {
    /// Forgets launches traced outside a block the flush encodes (a
    /// replay's, while settling): `profile_block` then takes exactly the
    /// block's own.
    pub(super) fn profile_start_block(&mut self) {
        if let Some(traced) = &mut self.gpu.traced {
            traced.clear();
        }
    }

    /// Records the block just encoded, if a profile is taken and it
    /// launched kernels.
    pub(super) fn profile_block(&mut self, run: &BlockRun) {
        let Some(wgsl) = self.gpu.traced.as_mut().map(std::mem::take) else {
            return;
        };
        if wgsl.is_empty() {
            return;
        }
        let made: Vec<TensorId> = run.steps.iter().map(|s| s.output).collect();
        let mut read: Vec<TensorId> = Vec::new();
        for &input in run.steps.iter().flat_map(|s| &s.inputs) {
            if !made.contains(&input) && !read.contains(&input) {
                read.push(input);
            }
        }
        let shaped = |ids: &[TensorId]| -> Vec<(TensorId, Vec<usize>)> {
            ids.iter()
                .map(|&t| {
                    let shape = self.records.get(&t).map(|r| r.shape.clone());
                    (t, shape.unwrap_or_default())
                })
                .collect()
        };
        let kernel = ProfiledKernel {
            ops: run.steps.iter().map(|s| s.op.to_string()).collect(),
            inputs: shaped(&read),
            outputs: shaped(&run.live),
            wgsl,
        };
        if let Some(taking) = &mut self.profile {
            taking.kernels.push(kernel);
        }
    }
}

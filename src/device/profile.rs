//! Profiles (TF.js's `tf.profile`): what a piece of a program launched.
//!
//! While a profile is taken, each block a flush encodes that launches
//! kernels is recorded as it is encoded: the ops fused into it, the tensors
//! it reads and writes, the WGSL of each kernel it launched, and, where the
//! adapter writes timestamps, the GPU's time running them. Taken at the
//! flush, never at replay: a replay runs the same blocks again, split for
//! diagnosis, and is not what the program asked for.

use futures_util::FutureExt;

use super::flush::BlockRun;
use super::{Device, DeviceState};
use crate::ir::TensorId;
use crate::runtime::{PendingRead, Traced};

/// What a profiled piece of a program launched.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// Each block that launched kernels, in launch order.
    pub kernels: Vec<ProfiledKernel>,
    /// `bytesInUse` at the end less at the start (negative when it freed).
    pub new_bytes: i64,
    /// The most bytes tensors held at once while it ran.
    pub peak_bytes: u64,
    /// The GPU's time running every kernel, in milliseconds: `None` where
    /// the adapter writes no timestamps (or a time did not come back).
    pub kernel_ms: Option<f64>,
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
    /// The GPU's time running them, in milliseconds (see `Profile`).
    pub kernel_ms: Option<f64>,
}

/// A profile being taken, and the bytes in use when it started.
pub(crate) struct Taking {
    kernels: Vec<ProfiledKernel>,
    /// Where each kernel's launches wrote their times (`Traced::stamps`).
    stamps: Vec<Vec<(usize, u32)>>,
    bytes_at_start: u64,
}

/// A profile taken, its kernels' times still on their way from the GPU.
pub(crate) struct Timing {
    profile: Profile,
    stamps: Vec<Vec<(usize, u32)>>,
    reads: Vec<PendingRead>,
    period: Option<f32>,
}

impl Timing {
    /// The profile, once the GPU's timestamps are back (the JS
    /// `profile()`'s; natively `Device::profile` has them at once).
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    pub(crate) async fn finish(self) -> Profile {
        let mut words = Vec::with_capacity(self.reads.len());
        for read in self.reads {
            words.push(read.await.ok());
        }
        timed(self.profile, &self.stamps, &words, self.period)
    }

    /// The profile with the timestamps already back: natively a read has
    /// waited for the GPU when it is made (`Device::profile`'s).
    fn now(self) -> Profile {
        let words: Vec<Option<Vec<u32>>> = self
            .reads
            .into_iter()
            .map(|read| read.now_or_never().and_then(Result::ok))
            .collect();
        timed(self.profile, &self.stamps, &words, self.period)
    }
}

/// `profile` with each kernel's time and their sum, from the words each
/// submit's timestamps read back as (two per timestamp, low first). A
/// kernel with a launch whose time is missing has none, and then neither
/// has the sum: a partial time would read as a whole one.
fn timed(
    mut profile: Profile,
    stamps: &[Vec<(usize, u32)>],
    words: &[Option<Vec<u32>>],
    period: Option<f32>,
) -> Profile {
    let Some(period) = period else {
        return profile;
    };
    let at = |read: usize, query: usize| -> Option<u64> {
        let words = words.get(read)?.as_ref()?;
        let (low, high) = (*words.get(2 * query)?, *words.get(2 * query + 1)?);
        Some(u64::from(low) | (u64::from(high) << 32))
    };
    for (kernel, stamps) in profile.kernels.iter_mut().zip(stamps) {
        let ticks: Option<u64> = stamps
            .iter()
            .map(|&(read, first)| {
                let (start, end) = (at(read, first as usize)?, at(read, first as usize + 1)?);
                Some(end.saturating_sub(start))
            })
            .sum();
        kernel.kernel_ms = ticks
            .filter(|_| !stamps.is_empty())
            .map(|t| t as f64 * f64::from(period) / 1e6);
    }
    profile.kernel_ms = profile.kernels.iter().map(|k| k.kernel_ms).sum();
    profile
}

impl Device {
    /// Runs `f` and everything it queued, and returns what that launched.
    /// The work `f` queued is flushed at the end (as `sync()` flushes:
    /// held expressions nobody read are not computed). Profiles do not nest:
    /// one started inside another ends it.
    pub fn profile<R>(&self, f: impl FnOnce() -> R) -> (R, Profile) {
        self.start_profile();
        let result = f();
        (result, self.end_profile().now())
    }

    /// Whether a profile is being recorded (started and not ended): the
    /// web's `profile` refuses to start a second while an async one runs.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn is_profiling(&self) -> bool {
        self.with_state(|state| state.profile.is_some())
    }

    /// Starts recording what flushes launch (`profile` split in two, for a
    /// caller whose `f` is asynchronous).
    pub(crate) fn start_profile(&self) {
        self.with_state(|state| {
            state.flush();
            state.stats.peak_bytes_in_use = state.stats.bytes_in_use;
            state.gpu.traced = Some(Traced::default());
            state.profile = Some(Taking {
                kernels: Vec::new(),
                stamps: Vec::new(),
                bytes_at_start: state.stats.bytes_in_use,
            });
        });
    }

    /// Flushes what is queued and returns what was launched since
    /// `start_profile` (an empty profile if none was started), its times
    /// on their way.
    pub(crate) fn end_profile(&self) -> Timing {
        self.with_state(|state| {
            state.flush();
            let traced = state.gpu.traced.take().unwrap_or_default();
            let period = state.gpu.timestamp_period();
            let Some(taking) = state.profile.take() else {
                return Timing {
                    profile: Profile::default(),
                    stamps: Vec::new(),
                    reads: Vec::new(),
                    period: None,
                };
            };
            // In i128: a difference of two u64 counts, never truncated.
            let change = i128::from(state.stats.bytes_in_use) - i128::from(taking.bytes_at_start);
            let profile = Profile {
                kernels: taking.kernels,
                new_bytes: i64::try_from(change).unwrap_or(if change < 0 {
                    i64::MIN
                } else {
                    i64::MAX
                }),
                peak_bytes: state.stats.peak_bytes_in_use,
                kernel_ms: None,
            };
            Timing {
                profile,
                stamps: taking.stamps,
                reads: traced.reads,
                period,
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
            traced.wgsl.clear();
            traced.stamps.clear();
        }
    }

    /// Records the block just encoded, if a profile is taken and it
    /// launched kernels.
    pub(super) fn profile_block(&mut self, run: &BlockRun) {
        let Some((wgsl, stamps)) = self
            .gpu
            .traced
            .as_mut()
            .map(|t| (std::mem::take(&mut t.wgsl), std::mem::take(&mut t.stamps)))
        else {
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
            kernel_ms: None,
        };
        if let Some(taking) = &mut self.profile {
            taking.kernels.push(kernel);
            taking.stamps.push(stamps);
        }
    }
}

//! Faults a program asks for (`inject_fault`), so it can test its own
//! error handling against the same path a real GPU error takes.

use super::flush::Step;

/// The kinds of fault `inject_fault` can raise. Each is raised as a real
/// validation error (an invalid copy in the kernel's submit): WebGPU lets a
/// program cause no out-of-memory or internal error on demand, so the kind
/// names the fault in its report, and its message says how it was raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Validation,
    OutOfMemory,
    Internal,
}

impl FaultKind {
    /// Every kind, for checks of names that come from users.
    pub const ALL: [FaultKind; 3] = [
        FaultKind::Validation,
        FaultKind::OutOfMemory,
        FaultKind::Internal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Validation => "validation",
            FaultKind::OutOfMemory => "out-of-memory",
            FaultKind::Internal => "internal",
        }
    }
}

/// A fault waiting for the `nth` block that computes `op`.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    pub op: String,
    pub nth: usize,
    pub kind: FaultKind,
    seen: usize,
}

impl Fault {
    pub fn new(op: String, nth: usize, kind: FaultKind) -> Fault {
        Fault {
            op,
            nth,
            kind,
            seen: 0,
        }
    }
}

/// A fault assigned to one block: which kind, and the step (the op) it
/// belongs to. Tied to the op rather than the block, so the failure is
/// rooted where an unfused program would root it, and the block's outputs
/// that do not depend on that op are written all the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Injected {
    pub kind: FaultKind,
    pub step: usize,
}

/// The faults to inject into a block of `steps`, of which those at
/// `computed` run (the others are skipped): each fault whose op the block
/// computes counts the block, and those reaching their `nth` are used
/// up. Several may land in one block (their ops fused together); each is
/// rooted at its own op.
pub(crate) fn take(faults: &mut Vec<Fault>, steps: &[Step], computed: &[usize]) -> Vec<Injected> {
    let mut injected = Vec::new();
    faults.retain_mut(|fault| {
        let Some(&step) = computed.iter().find(|&&s| steps[s].op == fault.op) else {
            return true;
        };
        fault.seen += 1;
        if fault.seen < fault.nth {
            return true;
        }
        injected.push(Injected {
            kind: fault.kind,
            step,
        });
        false
    });
    injected
}

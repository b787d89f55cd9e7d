//! `Outlined`: a value whose drop is one call, not code at each site.
//!
//! Handles the program makes and drops everywhere (a tensor's, a device's)
//! end in an `Rc`'s release, and the compiler copies that release (the
//! count, the last handle's cleanup) into every place one goes out of
//! scope: some seven hundred copies of a tensor's were 21 KB of the wasm
//! module. Wrapped in this, each site calls one function per type instead.
//! The call costs nothing next to the op that made the handle.

use std::mem::ManuallyDrop;
use std::ops::Deref;

#[derive(Clone)]
pub(crate) struct Outlined<T>(ManuallyDrop<T>);

impl<T> Outlined<T> {
    pub(crate) fn new(value: T) -> Outlined<T> {
        Outlined(ManuallyDrop::new(value))
    }
}

impl<T> Deref for Outlined<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> Drop for Outlined<T> {
    #[inline(never)]
    fn drop(&mut self) {
        // SAFETY: the value is dropped here and nowhere else (the field is
        // private and never taken out), and nothing reads it after: this is
        // the wrapper's own drop.
        unsafe { ManuallyDrop::drop(&mut self.0) }
    }
}

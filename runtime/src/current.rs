//! The state a context shares with its children ([`ContextShared`]), the
//! push/run/pop discipline for every driver call made on a child of a
//! context, and [`ContextChild`], the one owner of a child's handle that
//! makes those calls.
//!
//! 1. `cuCtxPushCurrent_v2(context)`. On failure the operation is not run and
//!    the push error is returned.
//! 2. The operation runs with the context current.
//! 3. `cuCtxPopCurrent_v2` always runs after a successful push, whatever the
//!    operation returned, and the popped handle must be the context.
//! 4. If the operation failed, its error is returned (a pop failure after it
//!    is not reported: the first failure is the cause). If the operation
//!    succeeded and the pop failed, the pop error is returned and whatever the
//!    operation created is released best-effort in a fresh push/release/pop
//!    (errors ignored; skipped if that push fails) so it does not leak.

use core::cell::Cell;
use core::ptr;
use std::rc::Rc;

use crate::driver_api::{CUcontext, CUdevice, DriverApi};
use crate::error::CudaError;
use crate::operation;

/// State shared by a [`Context`](crate::Context) and each of its children.
/// The driver context is destroyed when this is dropped (when the last of
/// them goes) unless [`Context::close`](crate::Context::close) destroyed it
/// already.
pub(crate) struct ContextShared {
    // `Drop::drop` below runs before this field is dropped, so the image is
    // still alive for `cuCtxDestroy_v2`.
    api: Rc<DriverApi>,
    handle: CUcontext,
    device: CUdevice,
    destroyed: Cell<bool>,
}

impl ContextShared {
    /// Owns `handle`, a context just created on `device` and popped.
    pub(crate) fn new(api: Rc<DriverApi>, handle: CUcontext, device: CUdevice) -> Self {
        Self {
            api,
            handle,
            device,
            destroyed: Cell::new(false),
        }
    }

    pub(crate) fn api(&self) -> &DriverApi {
        &self.api
    }

    pub(crate) fn handle(&self) -> CUcontext {
        self.handle
    }

    pub(crate) fn device(&self) -> CUdevice {
        self.device
    }

    /// Calls `cuCtxDestroy_v2` the first time only.
    pub(crate) fn destroy(&self) -> Result<(), CudaError> {
        if self.destroyed.replace(true) {
            return Ok(());
        }
        // SAFETY: the symbol has the listed signature and the image lives
        // while `self.api` does; the handle is this runtime's live context,
        // destroyed nowhere else (the flag above).
        let result = unsafe { (self.api.cuCtxDestroy_v2())(self.handle) };
        CudaError::check(operation::CTX_DESTROY, result)
    }
}

impl Drop for ContextShared {
    fn drop(&mut self) {
        let _ = self.destroy();
    }
}

/// Makes `context` current on the calling thread.
fn push(api: &DriverApi, context: CUcontext) -> Result<(), CudaError> {
    // SAFETY: the symbol has the listed signature and the image lives while
    // `api` does; `context` is a live context this runtime created.
    let result = unsafe { (api.cuCtxPushCurrent_v2())(context) };
    CudaError::check(operation::CTX_PUSH, result)
}

/// Pops the current context and checks it is `expected`.
pub(crate) fn pop_expecting(api: &DriverApi, expected: CUcontext) -> Result<(), CudaError> {
    let mut popped: CUcontext = ptr::null_mut();
    // SAFETY: as in `push`; `popped` is a valid place for the driver to write
    // one handle.
    let result = unsafe { (api.cuCtxPopCurrent_v2())(&mut popped) };
    CudaError::check(operation::CTX_POP, result)?;
    if popped == expected {
        Ok(())
    } else {
        Err(CudaError::refusal(operation::CTX_POP_WRONG_CONTEXT))
    }
}

/// What happened between a successful push and its pop.
struct Bracketed<T> {
    outcome: Result<T, CudaError>,
    popped: Result<(), CudaError>,
}

/// Pushes `context`, runs `operation`, pops. `Err` only when the push
/// failed (nothing else ran).
fn bracket<T>(
    api: &DriverApi,
    context: CUcontext,
    operation: impl FnOnce(&DriverApi) -> Result<T, CudaError>,
) -> Result<Bracketed<T>, CudaError> {
    push(api, context)?;
    let outcome = operation(api);
    let popped = pop_expecting(api, context);
    Ok(Bracketed { outcome, popped })
}

/// Releases a child's handle: `cuStreamDestroy_v2` or `cuMemFree_v2`.
///
/// # Safety
///
/// The handle must be live, made in the current context, and released
/// nowhere else.
pub(crate) type Release<H> = unsafe fn(&DriverApi, H) -> Result<(), CudaError>;

/// A driver handle made in a context: a stream or an allocation.
///
/// Holds the context, so the context is destroyed only after this handle is
/// released. Every driver call on the handle runs under push/run/pop. The
/// handle is released exactly once: by [`ContextChild::release`] (which
/// returns the error) or on drop (which ignores it). A failed release is not
/// retried, and one whose push failed is not attempted again: the driver's
/// state is unknown, so the handle is abandoned.
pub(crate) struct ContextChild<H: Copy> {
    context: Rc<ContextShared>,
    handle: H,
    release: Release<H>,
    released: bool,
}

impl<H: Copy> ContextChild<H> {
    /// Runs `create` with the context current and owns the handle it makes.
    /// When the pop after a successful `create` fails, the handle is released
    /// best-effort with `release` and the pop error is returned.
    pub(crate) fn create(
        context: &Rc<ContextShared>,
        create: impl FnOnce(&DriverApi) -> Result<H, CudaError>,
        release: Release<H>,
    ) -> Result<Self, CudaError> {
        let (api, context_handle) = (context.api(), context.handle());
        let Bracketed { outcome, popped } = bracket(api, context_handle, create)?;
        let handle = outcome?;
        if let Err(pop_error) = popped {
            if push(api, context_handle).is_ok() {
                // SAFETY: `handle` was just made in this context, which is
                // current again, and nothing else holds it.
                let _ = unsafe { release(api, handle) };
                let _ = pop_expecting(api, context_handle);
            }
            return Err(pop_error);
        }
        Ok(Self {
            context: Rc::clone(context),
            handle,
            release,
            released: false,
        })
    }

    /// The raw handle; valid while this child lives.
    pub(crate) fn handle(&self) -> H {
        self.handle
    }

    /// The raw handle of the context this child was made in.
    pub(crate) fn context_handle(&self) -> CUcontext {
        self.context.handle()
    }

    /// Whether `other` was made in the same context as this child.
    pub(crate) fn shares_context_with<O: Copy>(&self, other: &ContextChild<O>) -> bool {
        Rc::ptr_eq(&self.context, &other.context)
    }

    /// Runs `operation` on the handle with the context current.
    pub(crate) fn run<T>(
        &self,
        operation: impl FnOnce(&DriverApi, H) -> Result<T, CudaError>,
    ) -> Result<T, CudaError> {
        let handle = self.handle;
        let Bracketed { outcome, popped } =
            bracket(self.context.api(), self.context.handle(), |api| {
                operation(api, handle)
            })?;
        let value = outcome?;
        popped.map(|()| value)
    }

    /// Releases the handle the first time only.
    pub(crate) fn release(&mut self) -> Result<(), CudaError> {
        if core::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        let release = self.release;
        self.run(|api, handle| {
            // SAFETY: the handle is this live child, made in the context that
            // `run` made current, and released only here (the flag above).
            unsafe { release(api, handle) }
        })
    }
}

impl<H: Copy> Drop for ContextChild<H> {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

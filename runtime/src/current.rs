//! The push/run/pop discipline for every driver call made on a child of a
//! context.
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

use core::ptr;

use crate::driver_api::{CUcontext, DriverApi};
use crate::error::CudaError;
use crate::operation;

/// Makes `context` current on the calling thread.
pub(crate) fn push(api: &DriverApi, context: CUcontext) -> Result<(), CudaError> {
    // SAFETY: the symbol has the listed signature and the image lives while
    // `api` does; `context` is a live context this runtime created.
    let result = unsafe { (api.cuCtxPushCurrent_v2)(context) };
    CudaError::check(operation::CTX_PUSH, result)
}

/// Pops the current context and checks it is `expected`.
pub(crate) fn pop_expecting(api: &DriverApi, expected: CUcontext) -> Result<(), CudaError> {
    let mut popped: CUcontext = ptr::null_mut();
    // SAFETY: as in `push`; `popped` is a valid place for the driver to write
    // one handle.
    let result = unsafe { (api.cuCtxPopCurrent_v2)(&mut popped) };
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

/// Runs `operation` with `context` current (see the module docs).
pub(crate) fn run_current<T>(
    api: &DriverApi,
    context: CUcontext,
    operation: impl FnOnce(&DriverApi) -> Result<T, CudaError>,
) -> Result<T, CudaError> {
    let Bracketed { outcome, popped } = bracket(api, context, operation)?;
    let value = outcome?;
    popped.map(|()| value)
}

/// [`run_current`] for an operation that creates a resource: `release`
/// undoes a successful `create` when the pop after it fails.
pub(crate) fn create_current<T>(
    api: &DriverApi,
    context: CUcontext,
    create: impl FnOnce(&DriverApi) -> Result<T, CudaError>,
    release: impl FnOnce(&DriverApi, T),
) -> Result<T, CudaError> {
    let Bracketed { outcome, popped } = bracket(api, context, create)?;
    let value = outcome?;
    match popped {
        Ok(()) => Ok(value),
        Err(pop_error) => {
            if push(api, context).is_ok() {
                release(api, value);
                let _ = pop_expecting(api, context);
            }
            Err(pop_error)
        }
    }
}

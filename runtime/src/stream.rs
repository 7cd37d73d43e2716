//! The context's dedicated stream.

use core::fmt;
use core::marker::PhantomData;
use std::rc::Rc;

use crate::context::ContextShared;
use crate::current;
use crate::driver_api::CUstream;
use crate::error::CudaError;
use crate::operation;

/// A stream created by [`Context::create_stream`](crate::Context::create_stream).
///
/// Holds its context, so the context is destroyed only after this stream.
/// Released exactly once: by [`Stream::close`] (which reports errors) or on
/// drop (which ignores them).
///
/// Deliberately neither `Send` nor `Sync`:
///
/// ```compile_fail,E0277
/// fn require_send<T: Send>() {}
/// require_send::<rextio_cuda_runtime::Stream>();
/// ```
///
/// ```compile_fail,E0277
/// fn require_sync<T: Sync>() {}
/// require_sync::<rextio_cuda_runtime::Stream>();
/// ```
pub struct Stream {
    context: Rc<ContextShared>,
    handle: CUstream,
    released: bool,
    _not_send_or_sync: PhantomData<*const ()>,
}

impl Stream {
    pub(crate) fn new(context: Rc<ContextShared>, handle: CUstream) -> Self {
        Self {
            context,
            handle,
            released: false,
            _not_send_or_sync: PhantomData,
        }
    }

    /// Waits for all work on the stream (`cuStreamSynchronize`).
    ///
    /// Errors: `cuCtxPushCurrent_v2`, `cuStreamSynchronize`,
    /// `cuCtxPopCurrent_v2`, `cuCtxPopCurrent_v2:wrong-context`. The stream
    /// stays usable and owned after an error.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        let handle = self.handle;
        current::run_current(self.context.api(), self.context.handle(), |api| {
            // SAFETY: the symbol has the listed signature and the image lives
            // while the context does; `handle` is this live stream; the
            // context is current.
            let result = unsafe { (api.cuStreamSynchronize)(handle) };
            CudaError::check(operation::STREAM_SYNCHRONIZE, result)
        })
    }

    /// Destroys the stream now (`cuStreamDestroy_v2`).
    ///
    /// Errors: `cuCtxPushCurrent_v2` (the destroy is then not attempted and
    /// the handle is abandoned), `cuStreamDestroy_v2`, `cuCtxPopCurrent_v2`,
    /// `cuCtxPopCurrent_v2:wrong-context`. Never retried, never by drop.
    pub fn close(mut self) -> Result<(), CudaError> {
        self.release()
    }

    /// The raw driver handle; valid while this stream lives.
    pub fn raw_handle(&self) -> CUstream {
        self.handle
    }

    fn release(&mut self) -> Result<(), CudaError> {
        if core::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        let handle = self.handle;
        current::run_current(self.context.api(), self.context.handle(), |api| {
            // SAFETY: the symbol has the listed signature and the image lives
            // while the context does; `handle` is this live stream, released
            // only here (the flag above); the context is current.
            let result = unsafe { (api.cuStreamDestroy_v2)(handle) };
            CudaError::check(operation::STREAM_DESTROY, result)
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("handle", &self.handle)
            .field("context", &self.context.handle())
            .finish()
    }
}

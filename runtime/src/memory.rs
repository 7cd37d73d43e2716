//! Device memory allocated in a context.

use core::fmt;
use core::marker::PhantomData;
use std::rc::Rc;

use crate::current::{ContextChild, ContextShared};
use crate::driver_api::{CUdeviceptr, DriverApi};
use crate::error::{CudaError, Refused};
use crate::operation;

/// Device memory from [`Context::allocate`](crate::Context::allocate).
///
/// Holds its context, so the context is destroyed only after this memory is
/// freed. Freed exactly once: by [`DeviceAllocation::close`] (which reports
/// errors) or on drop (which ignores them).
///
/// Allocate, fill and read back through the context's stream (`no_run`: it
/// needs an NVIDIA driver; `api` comes from the reviewed loader,
/// `rextio_cuda_loader::load_reviewed`):
///
/// ```no_run
/// # use std::rc::Rc;
/// # use rextio_cuda_runtime::{device_get, initialize, Context, CudaError, DriverApi};
/// fn zeroed_kibibyte(api: Rc<DriverApi>) -> Result<Vec<u8>, CudaError> {
///     initialize(&api)?;
///     let context = Context::create(Rc::clone(&api), device_get(&api, 0)?)?;
///     let stream = context.create_stream()?;
///     let mut allocation = context.allocate(1024)?;
///     assert_eq!(allocation.byte_size(), 1024);
///     stream.fill(&mut allocation, 0)?;
///     let mut back = vec![0xff; allocation.byte_size()];
///     stream.copy_from_device(&allocation, 0, &mut back)?;
///     // A range past the end is refused before any driver call; its
///     // Display names the method and the numbers.
///     if let Err(error) = stream.copy_from_device(&allocation, 1000, &mut [0; 100]) {
///         eprintln!("{error}");
///     }
///     allocation.close()?;
///     stream.close()?;
///     context.close()?;
///     Ok(back)
/// }
/// ```
///
/// Deliberately neither `Send` nor `Sync`:
///
/// ```compile_fail,E0277
/// fn require_send<T: Send>() {}
/// require_send::<rextio_cuda_runtime::DeviceAllocation>();
/// ```
///
/// ```compile_fail,E0277
/// fn require_sync<T: Sync>() {}
/// require_sync::<rextio_cuda_runtime::DeviceAllocation>();
/// ```
pub struct DeviceAllocation {
    child: ContextChild<CUdeviceptr>,
    byte_size: usize,
    _not_send_or_sync: PhantomData<*const ()>,
}

impl DeviceAllocation {
    /// `cuMemAlloc_v2` in `context`; see [`Context::allocate`](crate::Context::allocate).
    pub(crate) fn allocate(
        context: &Rc<ContextShared>,
        byte_size: usize,
    ) -> Result<Self, CudaError> {
        if byte_size == 0 {
            return Err(CudaError::refused(
                operation::MEM_ALLOC_ZERO_BYTES,
                Refused::ZeroBytes,
            ));
        }
        let allocate = |api: &DriverApi| {
            let mut device_pointer: CUdeviceptr = 0;
            // SAFETY: the symbol has the listed signature and the image lives
            // while `api` does; `device_pointer` is a valid place for one
            // address; the context is current.
            let result = unsafe { (api.cuMemAlloc_v2())(&mut device_pointer, byte_size) };
            CudaError::check(operation::MEM_ALLOC, result).map(|()| device_pointer)
        };
        Ok(Self {
            child: ContextChild::create(context, allocate, free)?,
            byte_size,
            _not_send_or_sync: PhantomData,
        })
    }

    /// The device address; valid while this allocation lives.
    pub fn device_pointer(&self) -> CUdeviceptr {
        self.child.handle()
    }

    /// The size requested from the driver (never 0): the bytes
    /// [`Stream::fill`](crate::Stream::fill) sets and the end of every range
    /// the copies accept.
    pub fn byte_size(&self) -> usize {
        self.byte_size
    }

    /// The owner of the device address, for the stream's context check.
    pub(crate) fn child(&self) -> &ContextChild<CUdeviceptr> {
        &self.child
    }

    /// Frees the memory now (`cuMemFree_v2`).
    ///
    /// Errors: `cuCtxPushCurrent_v2` (the free is then not attempted and the
    /// memory is abandoned), `cuMemFree_v2`, `cuCtxPopCurrent_v2`,
    /// `cuCtxPopCurrent_v2:wrong-context`. Never retried, never by drop.
    pub fn close(mut self) -> Result<(), CudaError> {
        self.child.release()
    }
}

/// `cuMemFree_v2`, the allocation's [`Release`](crate::current::Release).
///
/// # Safety
///
/// As for [`Release`](crate::current::Release).
unsafe fn free(api: &DriverApi, device_pointer: CUdeviceptr) -> Result<(), CudaError> {
    // SAFETY: the symbol has the listed signature and the image lives while
    // `api` does; the caller guarantees the address is live, in the current
    // context, and freed nowhere else.
    let result = unsafe { (api.cuMemFree_v2())(device_pointer) };
    CudaError::check(operation::MEM_FREE, result)
}

impl fmt::Debug for DeviceAllocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceAllocation")
            .field(
                "device_pointer",
                &format_args!("{:#x}", self.child.handle()),
            )
            .field("byte_size", &self.byte_size)
            .field("context", &self.child.context_handle())
            .finish()
    }
}

//! The context's dedicated stream.

use core::fmt;
use core::marker::PhantomData;
use core::ptr;
use std::rc::Rc;

use crate::current::{ContextChild, ContextShared};
use crate::driver_api::{CUdeviceptr, CUstream, DriverApi, CU_STREAM_NON_BLOCKING};
use crate::error::{CudaError, Refused};
use crate::memory::DeviceAllocation;
use crate::operation;

/// `CU_STREAM_NON_BLOCKING`: the dedicated stream does not synchronize with
/// the legacy default stream, so other code using the default stream neither
/// waits for nor is waited on by this runtime's work; ordering is explicit
/// through [`Stream::synchronize`].
const STREAM_FLAGS: core::ffi::c_uint = CU_STREAM_NON_BLOCKING;

/// A stream created by [`Context::create_stream`](crate::Context::create_stream).
///
/// Holds its context, so the context is destroyed only after this stream.
/// Released exactly once: by [`Stream::close`] (which reports errors) or on
/// drop (which ignores them).
///
/// It moves bytes in and out of the context's [`DeviceAllocation`]s
/// ([`Stream::copy_to_device`], [`Stream::copy_from_device`],
/// [`Stream::fill`]); each is enqueued on this stream and synchronized before
/// it returns, so the host bytes are borrowed for exactly as long as the
/// driver uses them. Writing needs the allocation borrowed mutably, so no
/// other borrow can read it meanwhile.
///
/// A round trip (`no_run`: it needs an NVIDIA driver; `api` comes from the
/// reviewed loader, `rextio_cuda_loader::load_reviewed`):
///
/// ```no_run
/// # use std::rc::Rc;
/// # use rextio_cuda_runtime::{device_get, initialize, Context, CudaError, DriverApi};
/// fn round_trip(api: Rc<DriverApi>) -> Result<(), CudaError> {
///     initialize(&api)?;
///     let context = Context::create(Rc::clone(&api), device_get(&api, 0)?)?;
///     let stream = context.create_stream()?;
///     let mut allocation = context.allocate(4096)?;
///     stream.copy_to_device(&mut allocation, 0, b"hello, device")?;
///     let mut back = [0u8; 13];
///     stream.copy_from_device(&allocation, 0, &mut back)?;
///     assert_eq!(&back, b"hello, device");
///     // 200 bytes at offset 4000 do not fit 4096: refused, no driver call.
///     let refused = stream.copy_to_device(&mut allocation, 4000, &[0; 200]);
///     if let Err(error) = &refused {
///         println!("{error}"); // copy_to_device refused: 200 bytes at offset 4000 ...
///     }
///     allocation.close()?;
///     stream.close()?;
///     context.close()
/// }
/// ```
///
/// Writing while another borrow reads does not compile:
///
/// ```compile_fail,E0502
/// # use rextio_cuda_runtime::{DeviceAllocation, Stream};
/// fn write_while_reading(stream: &Stream, allocation: &mut DeviceAllocation) {
///     let reading: &DeviceAllocation = allocation;
///     stream.copy_to_device(allocation, 0, &[1, 2, 3]).unwrap();
///     println!("{}", reading.byte_size());
/// }
/// ```
///
/// and a closed allocation cannot be used at all:
///
/// ```compile_fail,E0382
/// # use rextio_cuda_runtime::{DeviceAllocation, Stream};
/// fn fill_after_close(stream: &Stream, mut allocation: DeviceAllocation) {
///     allocation.close().unwrap();
///     stream.fill(&mut allocation, 0).unwrap();
/// }
/// ```
///
/// The host side of a copy is an ordinary borrow, so it outlives the copy:
///
/// ```compile_fail,E0597
/// # use rextio_cuda_runtime::{DeviceAllocation, Stream};
/// fn read_into_a_dropped_buffer(stream: &Stream, allocation: &DeviceAllocation) {
///     let destination: &mut [u8];
///     {
///         let mut buffer = vec![0u8; 16];
///         destination = &mut buffer;
///     }
///     stream.copy_from_device(allocation, 0, destination).unwrap();
/// }
/// ```
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
    child: ContextChild<CUstream>,
    _not_send_or_sync: PhantomData<*const ()>,
}

impl Stream {
    /// `cuStreamCreate` in `context`; see [`Context::create_stream`](crate::Context::create_stream).
    pub(crate) fn create(context: &Rc<ContextShared>) -> Result<Self, CudaError> {
        let create = |api: &DriverApi| {
            let mut stream: CUstream = ptr::null_mut();
            // SAFETY: the symbol has the listed signature and the image lives
            // while `api` does; `stream` is a valid place for one handle; the
            // context is current.
            let result = unsafe { (api.cuStreamCreate())(&mut stream, STREAM_FLAGS) };
            CudaError::check(operation::STREAM_CREATE, result).map(|()| stream)
        };
        Ok(Self {
            child: ContextChild::create(context, create, destroy)?,
            _not_send_or_sync: PhantomData,
        })
    }

    /// Waits for all work on the stream (`cuStreamSynchronize`).
    ///
    /// Errors: `cuCtxPushCurrent_v2`, `cuStreamSynchronize`,
    /// `cuCtxPopCurrent_v2`, `cuCtxPopCurrent_v2:wrong-context`. The stream
    /// stays usable and owned after an error.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: `run` passes this live stream with its context current.
        self.child
            .run(|api, stream| unsafe { synchronize(api, stream) })
    }

    /// Copies `source` into `destination` at byte `offset`
    /// (`cuMemcpyHtoDAsync_v2` on this stream, then `cuStreamSynchronize`).
    ///
    /// Refused before any driver call (result -1):
    /// `cuMemcpyHtoDAsync_v2:other-context` when `destination` belongs to
    /// another context, `cuMemcpyHtoDAsync_v2:empty` for an empty `source`,
    /// `cuMemcpyHtoDAsync_v2:out-of-range` when the bytes would not fit
    /// between `offset` and [`DeviceAllocation::byte_size`]. Driver errors:
    /// `cuCtxPushCurrent_v2`, `cuMemcpyHtoDAsync_v2` (nothing was enqueued),
    /// `cuStreamSynchronize`, `cuCtxPopCurrent_v2`,
    /// `cuCtxPopCurrent_v2:wrong-context`.
    pub fn copy_to_device(
        &self,
        destination: &mut DeviceAllocation,
        offset: usize,
        source: &[u8],
    ) -> Result<(), CudaError> {
        let refusals = Refusals {
            method: "copy_to_device",
            other_context: operation::MEMCPY_TO_DEVICE_OTHER_CONTEXT,
            empty: operation::MEMCPY_TO_DEVICE_EMPTY,
            out_of_range: operation::MEMCPY_TO_DEVICE_OUT_OF_RANGE,
        };
        let address = self.device_range(destination, offset, source.len(), refusals)?;
        self.enqueue_and_synchronize(|api, stream| {
            // SAFETY: the symbol has the listed signature and the image lives
            // while the context does; `address` starts `source.len()` bytes
            // inside this live allocation of the current context; `source` is
            // valid for that many reads and stays borrowed until the stream
            // is synchronized.
            let result = unsafe {
                (api.cuMemcpyHtoDAsync_v2())(address, source.as_ptr().cast(), source.len(), stream)
            };
            CudaError::check(operation::MEMCPY_TO_DEVICE, result)
        })
    }

    /// Copies bytes of `source` from byte `offset` into all of `destination`
    /// (`cuMemcpyDtoHAsync_v2` on this stream, then `cuStreamSynchronize`).
    ///
    /// Refused before any driver call (result -1):
    /// `cuMemcpyDtoHAsync_v2:other-context`, `cuMemcpyDtoHAsync_v2:empty`
    /// (an empty `destination`), `cuMemcpyDtoHAsync_v2:out-of-range`. Driver
    /// errors: `cuCtxPushCurrent_v2`, `cuMemcpyDtoHAsync_v2`,
    /// `cuStreamSynchronize`, `cuCtxPopCurrent_v2`,
    /// `cuCtxPopCurrent_v2:wrong-context`; `destination`'s bytes are then
    /// unspecified.
    pub fn copy_from_device(
        &self,
        source: &DeviceAllocation,
        offset: usize,
        destination: &mut [u8],
    ) -> Result<(), CudaError> {
        let refusals = Refusals {
            method: "copy_from_device",
            other_context: operation::MEMCPY_FROM_DEVICE_OTHER_CONTEXT,
            empty: operation::MEMCPY_FROM_DEVICE_EMPTY,
            out_of_range: operation::MEMCPY_FROM_DEVICE_OUT_OF_RANGE,
        };
        let address = self.device_range(source, offset, destination.len(), refusals)?;
        self.enqueue_and_synchronize(|api, stream| {
            // SAFETY: the symbol has the listed signature and the image lives
            // while the context does; `address` starts `destination.len()`
            // bytes inside this live allocation of the current context;
            // `destination` is valid for that many writes and stays
            // exclusively borrowed until the stream is synchronized.
            let result = unsafe {
                (api.cuMemcpyDtoHAsync_v2())(
                    destination.as_mut_ptr().cast(),
                    address,
                    destination.len(),
                    stream,
                )
            };
            CudaError::check(operation::MEMCPY_FROM_DEVICE, result)
        })
    }

    /// Sets every byte of `destination` to `byte` (`cuMemsetD8Async` on this
    /// stream, then `cuStreamSynchronize`).
    ///
    /// Refused before any driver call (result -1):
    /// `cuMemsetD8Async:other-context`. Driver errors: `cuCtxPushCurrent_v2`,
    /// `cuMemsetD8Async`, `cuStreamSynchronize`, `cuCtxPopCurrent_v2`,
    /// `cuCtxPopCurrent_v2:wrong-context`.
    pub fn fill(&self, destination: &mut DeviceAllocation, byte: u8) -> Result<(), CudaError> {
        if !self.child.shares_context_with(destination.child()) {
            let refused = Refused::OtherContext { method: "fill" };
            return Err(CudaError::refused(operation::MEMSET_OTHER_CONTEXT, refused));
        }
        let (address, byte_size) = (destination.device_pointer(), destination.byte_size());
        self.enqueue_and_synchronize(|api, stream| {
            // SAFETY: the symbol has the listed signature and the image lives
            // while the context does; `address` is this live allocation of
            // the current context, `byte_size` bytes long.
            let result = unsafe { (api.cuMemsetD8Async())(address, byte, byte_size, stream) };
            CudaError::check(operation::MEMSET, result)
        })
    }

    /// The device address of `length` bytes at `offset` of `allocation`,
    /// after the checks every copy makes before any driver call, in this
    /// order: same context, not empty, within the allocation.
    fn device_range(
        &self,
        allocation: &DeviceAllocation,
        offset: usize,
        length: usize,
        refusals: Refusals,
    ) -> Result<CUdeviceptr, CudaError> {
        let (method, size) = (refusals.method, allocation.byte_size());
        if !self.child.shares_context_with(allocation.child()) {
            let refused = Refused::OtherContext { method };
            return Err(CudaError::refused(refusals.other_context, refused));
        }
        if length == 0 {
            let refused = Refused::Empty {
                method,
                offset,
                size,
            };
            return Err(CudaError::refused(refusals.empty, refused));
        }
        let fits = offset
            .checked_add(length)
            .is_some_and(|end| end <= allocation.byte_size());
        let address = CUdeviceptr::try_from(offset)
            .ok()
            .and_then(|offset| allocation.device_pointer().checked_add(offset));
        match address {
            Some(address) if fits => Ok(address),
            _ => {
                let refused = Refused::OutOfRange {
                    method,
                    offset,
                    length,
                    size,
                };
                Err(CudaError::refused(refusals.out_of_range, refused))
            }
        }
    }

    /// Runs `enqueue` on this stream with the context current, then
    /// `cuStreamSynchronize` (only when `enqueue` succeeded), all within one
    /// push and pop.
    fn enqueue_and_synchronize(
        &self,
        enqueue: impl FnOnce(&DriverApi, CUstream) -> Result<(), CudaError>,
    ) -> Result<(), CudaError> {
        self.child.run(|api, stream| {
            enqueue(api, stream)?;
            // SAFETY: `run` passes this live stream with its context current.
            unsafe { synchronize(api, stream) }
        })
    }

    /// Destroys the stream now (`cuStreamDestroy_v2`).
    ///
    /// Errors: `cuCtxPushCurrent_v2` (the destroy is then not attempted and
    /// the handle is abandoned), `cuStreamDestroy_v2`, `cuCtxPopCurrent_v2`,
    /// `cuCtxPopCurrent_v2:wrong-context`. Never retried, never by drop.
    pub fn close(mut self) -> Result<(), CudaError> {
        self.child.release()
    }

    /// The raw driver handle; valid while this stream lives.
    pub fn raw_handle(&self) -> CUstream {
        self.child.handle()
    }
}

/// The method a person called and the operation names its checks refuse with.
struct Refusals {
    method: &'static str,
    other_context: &'static str,
    empty: &'static str,
    out_of_range: &'static str,
}

/// `cuStreamSynchronize`: waits for all work on `stream`.
///
/// # Safety
///
/// `stream` must be a live stream of the current context.
unsafe fn synchronize(api: &DriverApi, stream: CUstream) -> Result<(), CudaError> {
    // SAFETY: the symbol has the listed signature and the image lives while
    // `api` does; the caller guarantees `stream` is live and current.
    let result = unsafe { (api.cuStreamSynchronize())(stream) };
    CudaError::check(operation::STREAM_SYNCHRONIZE, result)
}

/// `cuStreamDestroy_v2`, the stream's [`Release`](crate::current::Release).
///
/// # Safety
///
/// As for [`Release`](crate::current::Release).
unsafe fn destroy(api: &DriverApi, stream: CUstream) -> Result<(), CudaError> {
    // SAFETY: the symbol has the listed signature and the image lives while
    // `api` does; the caller guarantees `stream` is live, in the current
    // context, and released nowhere else.
    let result = unsafe { (api.cuStreamDestroy_v2())(stream) };
    CudaError::check(operation::STREAM_DESTROY, result)
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("handle", &self.child.handle())
            .field("context", &self.child.context_handle())
            .finish()
    }
}

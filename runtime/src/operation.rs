//! Stable operation names carried by [`CudaError`](crate::CudaError).
//!
//! A plain export name means that driver call returned a non-zero result,
//! which the error carries. A name with a `:suffix` is a check the runtime
//! made itself; its result is always
//! [`CudaError::RUNTIME_REFUSAL`](crate::CudaError::RUNTIME_REFUSAL) (-1).
//! Export names are the generated [`export_name`] constants, so a name
//! here is always one the driver table lists.

use crate::driver_api::export_name;

/// `EXPORT:check`, a check the runtime made itself around `EXPORT` (a
/// listed export: anything else does not compile).
macro_rules! runtime_check {
    ($export:ident, $check:literal) => {{
        let _: &str = export_name::$export;
        concat!(stringify!($export), ":", $check)
    }};
}

/// `cuInit(0)` failed ([`initialize`](crate::initialize)).
pub const INIT: &str = export_name::cuInit;
/// `cuDeviceGet` failed ([`device_get`](crate::device_get)).
pub const DEVICE_GET: &str = export_name::cuDeviceGet;
/// `cuCtxCreate_v2` failed ([`Context::create`](crate::Context::create)).
pub const CTX_CREATE: &str = export_name::cuCtxCreate_v2;
/// `cuCtxDestroy_v2` failed (closing the context).
pub const CTX_DESTROY: &str = export_name::cuCtxDestroy_v2;
/// `Context::close` while streams or allocations are still alive; the
/// context is destroyed when the last of them is released.
pub const CTX_DESTROY_CHILDREN_LIVE: &str = runtime_check!(cuCtxDestroy_v2, "children-live");
/// `cuCtxPushCurrent_v2` failed before a child operation; the operation was
/// not attempted.
pub const CTX_PUSH: &str = export_name::cuCtxPushCurrent_v2;
/// `cuCtxPopCurrent_v2` failed after creating the context or after a child
/// operation.
pub const CTX_POP: &str = export_name::cuCtxPopCurrent_v2;
/// `cuCtxPopCurrent_v2` succeeded but returned a context other than this
/// runtime's; the caller's current-context stack is not what it expected.
pub const CTX_POP_WRONG_CONTEXT: &str = runtime_check!(cuCtxPopCurrent_v2, "wrong-context");
/// `cuStreamCreate` failed ([`Context::create_stream`](crate::Context::create_stream)).
pub const STREAM_CREATE: &str = export_name::cuStreamCreate;
/// `cuStreamSynchronize` failed ([`Stream::synchronize`](crate::Stream::synchronize)).
pub const STREAM_SYNCHRONIZE: &str = export_name::cuStreamSynchronize;
/// `cuStreamDestroy_v2` failed (closing the stream).
pub const STREAM_DESTROY: &str = export_name::cuStreamDestroy_v2;
/// `cuMemAlloc_v2` failed ([`Context::allocate`](crate::Context::allocate)).
pub const MEM_ALLOC: &str = export_name::cuMemAlloc_v2;
/// `Context::allocate(0)`: refused before any driver call.
pub const MEM_ALLOC_ZERO_BYTES: &str = runtime_check!(cuMemAlloc_v2, "zero-bytes");
/// `cuMemFree_v2` failed (closing the allocation).
pub const MEM_FREE: &str = export_name::cuMemFree_v2;
/// `cuMemcpyHtoDAsync_v2` failed ([`Stream::copy_to_device`](crate::Stream::copy_to_device)).
pub const MEMCPY_TO_DEVICE: &str = export_name::cuMemcpyHtoDAsync_v2;
/// `Stream::copy_to_device` past the allocation's end: refused before any driver call.
pub const MEMCPY_TO_DEVICE_OUT_OF_RANGE: &str =
    runtime_check!(cuMemcpyHtoDAsync_v2, "out-of-range");
/// `Stream::copy_to_device` of no bytes: refused before any driver call.
pub const MEMCPY_TO_DEVICE_EMPTY: &str = runtime_check!(cuMemcpyHtoDAsync_v2, "empty");
/// `Stream::copy_to_device` with an allocation of another context: refused
/// before any driver call.
pub const MEMCPY_TO_DEVICE_OTHER_CONTEXT: &str =
    runtime_check!(cuMemcpyHtoDAsync_v2, "other-context");
/// `cuMemcpyDtoHAsync_v2` failed ([`Stream::copy_from_device`](crate::Stream::copy_from_device)).
pub const MEMCPY_FROM_DEVICE: &str = export_name::cuMemcpyDtoHAsync_v2;
/// `Stream::copy_from_device` past the allocation's end: refused before any driver call.
pub const MEMCPY_FROM_DEVICE_OUT_OF_RANGE: &str =
    runtime_check!(cuMemcpyDtoHAsync_v2, "out-of-range");
/// `Stream::copy_from_device` of no bytes: refused before any driver call.
pub const MEMCPY_FROM_DEVICE_EMPTY: &str = runtime_check!(cuMemcpyDtoHAsync_v2, "empty");
/// `Stream::copy_from_device` with an allocation of another context: refused
/// before any driver call.
pub const MEMCPY_FROM_DEVICE_OTHER_CONTEXT: &str =
    runtime_check!(cuMemcpyDtoHAsync_v2, "other-context");
/// `cuMemsetD8Async` failed ([`Stream::fill`](crate::Stream::fill)).
pub const MEMSET: &str = export_name::cuMemsetD8Async;
/// `Stream::fill` with an allocation of another context: refused before any
/// driver call.
pub const MEMSET_OTHER_CONTEXT: &str = runtime_check!(cuMemsetD8Async, "other-context");

//! Unit tests against an in-test fake driver.
//!
//! The fake keeps a per-thread log of every driver call, a simulated
//! current-context stack and the set of live handles, and can be told to fail
//! the n-th call of an export with a given result. Each test starts from a
//! fresh fake (`fresh_api`), so tests are independent of the thread they run
//! on.

use core::ffi::{c_int, c_uchar, c_uint, c_void, CStr};
use core::ptr::{self, NonNull};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::*;

const CALLER_CONTEXT: &str = "caller";

#[derive(Default)]
struct FakeDriver {
    log: Vec<String>,
    calls_by_name: BTreeMap<&'static str, usize>,
    /// (export, 1-based occurrence) -> result to return instead of running.
    failures: BTreeMap<(&'static str, usize), CUresult>,
    /// 1-based occurrences of `cuCtxPopCurrent_v2` that pop normally but
    /// report a foreign context.
    foreign_pops: Vec<usize>,
    labels: BTreeMap<usize, String>,
    next_id: usize,
    stack: Vec<usize>,
    live_contexts: Vec<usize>,
    /// handle -> owning context
    live_streams: BTreeMap<usize, usize>,
    live_allocations: BTreeMap<usize, usize>,
    /// allocation address -> its bytes (device memory)
    memory: BTreeMap<usize, Vec<u8>>,
    /// stream handle -> work enqueued and not yet run (it runs at
    /// `cuStreamSynchronize`, as a real stream's may run any time before)
    pending: BTreeMap<usize, Vec<Pending>>,
}

/// Work enqueued on a fake stream. The host addresses are used only when
/// it runs, so a host buffer that did not outlive the synchronize is a use
/// after free (Miri reports it).
enum Pending {
    ToDevice {
        address: usize,
        source: *const u8,
        length: usize,
    },
    FromDevice {
        destination: *mut u8,
        address: usize,
        length: usize,
    },
    Fill {
        address: usize,
        value: u8,
        length: usize,
    },
}

/// What device memory holds before anything writes it.
const FRESH_DEVICE_BYTE: u8 = 0xEE;

thread_local! {
    static FAKE: RefCell<FakeDriver> = RefCell::new(FakeDriver::default());
}

fn with_fake<T>(f: impl FnOnce(&mut FakeDriver) -> T) -> T {
    FAKE.with(|fake| f(&mut fake.borrow_mut()))
}

impl FakeDriver {
    /// Counts the call; returns the injected result when this occurrence is
    /// told to fail (and logs it), otherwise `None`.
    fn enter(&mut self, name: &'static str, detail: &str) -> Option<CUresult> {
        let occurrence = self.calls_by_name.entry(name).or_insert(0);
        *occurrence += 1;
        let failure = self.failures.get(&(name, *occurrence)).copied();
        if let Some(result) = failure {
            let outcome = format!("-> error {result}");
            if detail.is_empty() {
                self.record(name, &outcome);
            } else {
                self.record(name, &format!("{detail} {outcome}"));
            }
        }
        failure
    }

    fn record(&mut self, name: &str, detail: &str) {
        if detail.is_empty() {
            self.log.push(name.to_owned());
        } else {
            self.log.push(format!("{name} {detail}"));
        }
    }

    fn new_handle(&mut self, kind: &str) -> usize {
        self.next_id += 1;
        let address = self.next_id * 0x100;
        self.labels
            .insert(address, format!("{kind}{}", self.next_id));
        address
    }

    fn label(&self, address: usize) -> String {
        self.labels
            .get(&address)
            .cloned()
            .unwrap_or_else(|| format!("unknown{address:#x}"))
    }

    /// The allocation holding `length` bytes at device `address`, and the
    /// offset of `address` in it, when it is live and owned by `context`.
    fn device_range(
        &self,
        address: usize,
        length: usize,
        context: usize,
    ) -> Option<(usize, usize)> {
        let (&base, bytes) = self.memory.range(..=address).next_back()?;
        let offset = address - base;
        let owned = self.live_allocations.get(&base) == Some(&context);
        (owned && offset.checked_add(length)? <= bytes.len()).then_some((base, offset))
    }

    /// Runs the work pending on `stream`, in order.
    fn run_pending(&mut self, stream: usize) {
        for work in self.pending.remove(&stream).unwrap_or_default() {
            match work {
                Pending::ToDevice {
                    address,
                    source,
                    length,
                } => {
                    let (base, offset) = self.locate(address);
                    // SAFETY: the runtime promised `source` valid for
                    // `length` reads until the stream is synchronized.
                    let source = unsafe { core::slice::from_raw_parts(source, length) };
                    self.bytes(base)[offset..offset + length].copy_from_slice(source);
                }
                Pending::FromDevice {
                    destination,
                    address,
                    length,
                } => {
                    let (base, offset) = self.locate(address);
                    // SAFETY: the runtime promised `destination` valid for
                    // `length` writes until the stream is synchronized.
                    let destination =
                        unsafe { core::slice::from_raw_parts_mut(destination, length) };
                    destination.copy_from_slice(&self.bytes(base)[offset..offset + length]);
                }
                Pending::Fill {
                    address,
                    value,
                    length,
                } => {
                    let (base, offset) = self.locate(address);
                    self.bytes(base)[offset..offset + length].fill(value);
                }
            }
        }
    }

    /// The allocation and offset of an address checked when enqueued.
    fn locate(&self, address: usize) -> (usize, usize) {
        let (&base, _) = self.memory.range(..=address).next_back().expect("checked");
        (base, address - base)
    }

    fn bytes(&mut self, base: usize) -> &mut Vec<u8> {
        self.memory.get_mut(&base).expect("a live allocation")
    }

    fn current_label(&self) -> String {
        match self.stack.last() {
            Some(&top) => self.label(top),
            None => "none".to_owned(),
        }
    }
}

fn context_handle(address: usize) -> CUcontext {
    ptr::without_provenance_mut(address)
}

fn stream_handle(address: usize) -> CUstream {
    ptr::without_provenance_mut(address)
}

// The fake exports. Each has exactly the signature of its listed symbol.

unsafe extern "system" fn fake_cu_init(flags: c_uint) -> CUresult {
    with_fake(|fake| {
        let detail = format!("flags={flags}");
        if let Some(result) = fake.enter("cuInit", &detail) {
            return result;
        }
        fake.record("cuInit", &detail);
        CUDA_SUCCESS
    })
}

unsafe extern "system" fn fake_cu_device_get(device: *mut CUdevice, ordinal: c_int) -> CUresult {
    with_fake(|fake| {
        let detail = format!("ordinal={ordinal}");
        if let Some(result) = fake.enter("cuDeviceGet", &detail) {
            return result;
        }
        fake.record("cuDeviceGet", &detail);
        // SAFETY: the runtime passes a valid place for one device.
        unsafe { device.write(ordinal + 40) };
        CUDA_SUCCESS
    })
}

unsafe extern "system" fn fake_cu_ctx_create(
    context: *mut CUcontext,
    flags: c_uint,
    device: CUdevice,
) -> CUresult {
    with_fake(|fake| {
        let detail = format!("flags={flags} device={device}");
        if let Some(result) = fake.enter("cuCtxCreate_v2", &detail) {
            return result;
        }
        let created = fake.new_handle("ctx");
        fake.live_contexts.push(created);
        fake.stack.push(created);
        let label = fake.label(created);
        fake.record("cuCtxCreate_v2", &format!("{detail} -> {label}"));
        // SAFETY: the runtime passes a valid place for one handle.
        unsafe { context.write(context_handle(created)) };
        CUDA_SUCCESS
    })
}

unsafe extern "system" fn fake_cu_ctx_destroy(context: CUcontext) -> CUresult {
    with_fake(|fake| {
        let address = context.addr();
        let detail = fake.label(address);
        if let Some(result) = fake.enter("cuCtxDestroy_v2", &detail) {
            return result;
        }
        let Some(index) = fake.live_contexts.iter().position(|&c| c == address) else {
            fake.record("cuCtxDestroy_v2", &format!("{detail} -> not live"));
            return CUDA_ERROR_INVALID_CONTEXT;
        };
        fake.live_contexts.remove(index);
        // Like the driver: a destroyed context that is current is popped.
        fake.stack.retain(|&c| c != address);
        let orphans = fake.live_streams.values().any(|&c| c == address)
            || fake.live_allocations.values().any(|&c| c == address);
        let detail = if orphans {
            format!("{detail} WITH LIVE CHILDREN")
        } else {
            detail
        };
        fake.record("cuCtxDestroy_v2", &detail);
        CUDA_SUCCESS
    })
}

unsafe extern "system" fn fake_cu_ctx_push(context: CUcontext) -> CUresult {
    with_fake(|fake| {
        let address = context.addr();
        let detail = fake.label(address);
        if let Some(result) = fake.enter("cuCtxPushCurrent_v2", &detail) {
            return result;
        }
        if !fake.live_contexts.contains(&address) {
            fake.record("cuCtxPushCurrent_v2", &format!("{detail} -> not live"));
            return CUDA_ERROR_INVALID_CONTEXT;
        }
        fake.stack.push(address);
        fake.record("cuCtxPushCurrent_v2", &detail);
        CUDA_SUCCESS
    })
}

unsafe extern "system" fn fake_cu_ctx_pop(context: *mut CUcontext) -> CUresult {
    with_fake(|fake| {
        if let Some(result) = fake.enter("cuCtxPopCurrent_v2", "") {
            return result;
        }
        let Some(popped) = fake.stack.pop() else {
            fake.record("cuCtxPopCurrent_v2", "-> empty stack");
            return CUDA_ERROR_INVALID_CONTEXT;
        };
        let occurrence = fake.calls_by_name["cuCtxPopCurrent_v2"];
        let reported = if fake.foreign_pops.contains(&occurrence) {
            fake.new_handle("foreign")
        } else {
            popped
        };
        let label = fake.label(reported);
        fake.record("cuCtxPopCurrent_v2", &format!("-> {label}"));
        // SAFETY: the runtime passes a valid place for one handle.
        unsafe { context.write(context_handle(reported)) };
        CUDA_SUCCESS
    })
}

unsafe extern "system" fn fake_cu_stream_create(stream: *mut CUstream, flags: c_uint) -> CUresult {
    with_fake(|fake| {
        let detail = format!("flags={flags} in {}", fake.current_label());
        if let Some(result) = fake.enter("cuStreamCreate", &detail) {
            return result;
        }
        let Some(&owner) = fake.stack.last() else {
            fake.record("cuStreamCreate", &format!("{detail} -> no context"));
            return CUDA_ERROR_INVALID_CONTEXT;
        };
        let created = fake.new_handle("stream");
        fake.live_streams.insert(created, owner);
        let label = fake.label(created);
        fake.record("cuStreamCreate", &format!("{detail} -> {label}"));
        // SAFETY: the runtime passes a valid place for one handle.
        unsafe { stream.write(stream_handle(created)) };
        CUDA_SUCCESS
    })
}

fn stream_call(name: &'static str, stream: CUstream, destroy: bool) -> CUresult {
    with_fake(|fake| {
        let address = stream.addr();
        let detail = format!("{} in {}", fake.label(address), fake.current_label());
        if let Some(result) = fake.enter(name, &detail) {
            return result;
        }
        let known = if destroy {
            fake.live_streams.remove(&address).is_some()
        } else {
            fake.live_streams.contains_key(&address)
        };
        if !known {
            fake.record(name, &format!("{detail} -> not live"));
            return CUDA_ERROR_INVALID_HANDLE;
        }
        if !destroy {
            fake.run_pending(address);
        }
        fake.record(name, &detail);
        CUDA_SUCCESS
    })
}

unsafe extern "system" fn fake_cu_stream_destroy(stream: CUstream) -> CUresult {
    stream_call("cuStreamDestroy_v2", stream, true)
}

unsafe extern "system" fn fake_cu_stream_synchronize(stream: CUstream) -> CUresult {
    stream_call("cuStreamSynchronize", stream, false)
}

unsafe extern "system" fn fake_cu_mem_alloc(
    device_pointer: *mut CUdeviceptr,
    byte_size: usize,
) -> CUresult {
    with_fake(|fake| {
        let detail = format!("{byte_size} in {}", fake.current_label());
        if let Some(result) = fake.enter("cuMemAlloc_v2", &detail) {
            return result;
        }
        let Some(&owner) = fake.stack.last() else {
            fake.record("cuMemAlloc_v2", &format!("{detail} -> no context"));
            return CUDA_ERROR_INVALID_CONTEXT;
        };
        let created = fake.new_handle("mem");
        fake.live_allocations.insert(created, owner);
        fake.memory
            .insert(created, vec![FRESH_DEVICE_BYTE; byte_size]);
        // Later handles start past this allocation's bytes, so an address
        // inside it names it alone.
        fake.next_id += byte_size.div_ceil(0x100).saturating_sub(1);
        let label = fake.label(created);
        fake.record("cuMemAlloc_v2", &format!("{detail} -> {label}"));
        // SAFETY: the runtime passes a valid place for one address.
        unsafe { device_pointer.write(created as CUdeviceptr) };
        CUDA_SUCCESS
    })
}

unsafe extern "system" fn fake_cu_mem_free(device_pointer: CUdeviceptr) -> CUresult {
    with_fake(|fake| {
        let address = device_pointer as usize;
        let detail = format!("{} in {}", fake.label(address), fake.current_label());
        if let Some(result) = fake.enter("cuMemFree_v2", &detail) {
            return result;
        }
        if fake.live_allocations.remove(&address).is_none() {
            fake.record("cuMemFree_v2", &format!("{detail} -> not live"));
            return CUDA_ERROR_INVALID_HANDLE;
        }
        fake.memory.remove(&address);
        fake.record("cuMemFree_v2", &detail);
        CUDA_SUCCESS
    })
}

/// Enqueues `work` on `stream` when the stream is live in the current
/// context and `length` bytes at `address` lie in one of its allocations.
/// Logged as `NAME memN+OFFSET LENGTH on streamN in ctxN`.
fn enqueue(
    name: &'static str,
    stream: CUstream,
    address: CUdeviceptr,
    length: usize,
    work: Pending,
) -> CUresult {
    with_fake(|fake| {
        let (stream, address) = (stream.addr(), address as usize);
        let current = fake.stack.last().copied();
        let range = current.and_then(|context| fake.device_range(address, length, context));
        let target = match range {
            Some((base, offset)) => format!("{}+{offset}", fake.label(base)),
            None => format!("{address:#x}"),
        };
        let detail = format!(
            "{target} {length} on {} in {}",
            fake.label(stream),
            fake.current_label()
        );
        if let Some(result) = fake.enter(name, &detail) {
            return result;
        }
        let stream_in_context =
            current.is_some() && fake.live_streams.get(&stream) == current.as_ref();
        if !stream_in_context || range.is_none() {
            fake.record(name, &format!("{detail} -> invalid"));
            return CUDA_ERROR_INVALID_VALUE;
        }
        fake.pending.entry(stream).or_default().push(work);
        fake.record(name, &detail);
        CUDA_SUCCESS
    })
}

unsafe extern "system" fn fake_cu_memcpy_htod(
    destination: CUdeviceptr,
    source: *const c_void,
    byte_count: usize,
    stream: CUstream,
) -> CUresult {
    let work = Pending::ToDevice {
        address: destination as usize,
        source: source.cast(),
        length: byte_count,
    };
    enqueue(
        "cuMemcpyHtoDAsync_v2",
        stream,
        destination,
        byte_count,
        work,
    )
}

unsafe extern "system" fn fake_cu_memcpy_dtoh(
    destination: *mut c_void,
    source: CUdeviceptr,
    byte_count: usize,
    stream: CUstream,
) -> CUresult {
    let work = Pending::FromDevice {
        destination: destination.cast(),
        address: source as usize,
        length: byte_count,
    };
    enqueue("cuMemcpyDtoHAsync_v2", stream, source, byte_count, work)
}

unsafe extern "system" fn fake_cu_memset_d8(
    destination: CUdeviceptr,
    value: c_uchar,
    count: usize,
    stream: CUstream,
) -> CUresult {
    let work = Pending::Fill {
        address: destination as usize,
        value,
        length: count,
    };
    enqueue("cuMemsetD8Async", stream, destination, count, work)
}

/// Every export without a fake of its own above: logged by name, returns
/// the configured failure or success.
struct Logged;

impl defaults::DefaultCall for Logged {
    fn call(export_name: &'static str) -> CUresult {
        with_fake(|fake| {
            fake.enter(export_name, "").unwrap_or_else(|| {
                fake.record(export_name, "");
                CUDA_SUCCESS
            })
        })
    }
}

/// The address of the fake export `name`: this file's fakes first, the
/// generated default for every other listed export.
fn fake_symbol(name: &CStr) -> Option<NonNull<c_void>> {
    type Status = CUresult;
    let address: *mut c_void = match name.to_bytes() {
        b"cuInit" => fake_cu_init as unsafe extern "system" fn(c_uint) -> Status as *mut c_void,
        b"cuDeviceGet" => {
            fake_cu_device_get as unsafe extern "system" fn(*mut CUdevice, c_int) -> Status
                as *mut c_void
        }
        b"cuCtxCreate_v2" => {
            fake_cu_ctx_create
                as unsafe extern "system" fn(*mut CUcontext, c_uint, CUdevice) -> Status
                as *mut c_void
        }
        b"cuCtxDestroy_v2" => {
            fake_cu_ctx_destroy as unsafe extern "system" fn(CUcontext) -> Status as *mut c_void
        }
        b"cuCtxPushCurrent_v2" => {
            fake_cu_ctx_push as unsafe extern "system" fn(CUcontext) -> Status as *mut c_void
        }
        b"cuCtxPopCurrent_v2" => {
            fake_cu_ctx_pop as unsafe extern "system" fn(*mut CUcontext) -> Status as *mut c_void
        }
        b"cuStreamCreate" => {
            fake_cu_stream_create as unsafe extern "system" fn(*mut CUstream, c_uint) -> Status
                as *mut c_void
        }
        b"cuStreamDestroy_v2" => {
            fake_cu_stream_destroy as unsafe extern "system" fn(CUstream) -> Status as *mut c_void
        }
        b"cuStreamSynchronize" => {
            fake_cu_stream_synchronize as unsafe extern "system" fn(CUstream) -> Status
                as *mut c_void
        }
        b"cuMemAlloc_v2" => {
            fake_cu_mem_alloc as unsafe extern "system" fn(*mut CUdeviceptr, usize) -> Status
                as *mut c_void
        }
        b"cuMemFree_v2" => {
            fake_cu_mem_free as unsafe extern "system" fn(CUdeviceptr) -> Status as *mut c_void
        }
        b"cuMemcpyHtoDAsync_v2" => {
            fake_cu_memcpy_htod
                as unsafe extern "system" fn(CUdeviceptr, *const c_void, usize, CUstream) -> Status
                as *mut c_void
        }
        b"cuMemcpyDtoHAsync_v2" => {
            fake_cu_memcpy_dtoh
                as unsafe extern "system" fn(*mut c_void, CUdeviceptr, usize, CUstream) -> Status
                as *mut c_void
        }
        b"cuMemsetD8Async" => {
            fake_cu_memset_d8
                as unsafe extern "system" fn(CUdeviceptr, c_uchar, usize, CUstream) -> Status
                as *mut c_void
        }
        _ => return defaults::default_export::<Logged>(name),
    };
    NonNull::new(address)
}

/// Stands in for the driver image; records its drop in the fake's log.
struct FakeImage;

impl Drop for FakeImage {
    fn drop(&mut self) {
        with_fake(|fake| fake.record("image dropped", ""));
    }
}

/// A fresh fake with the caller's own context already current, and a table
/// that resolves to it.
fn fresh_api() -> Rc<DriverApi> {
    with_fake(|fake| {
        *fake = FakeDriver::default();
        let caller = fake.new_handle(CALLER_CONTEXT);
        fake.labels.insert(caller, CALLER_CONTEXT.to_owned());
        fake.live_contexts.push(caller);
        fake.stack.push(caller);
    });
    // SAFETY: every fake has exactly the listed signature and is a plain
    // function, valid for the whole program.
    let api = unsafe { DriverApi::resolve(FakeImage, |_, name| fake_symbol(name)) };
    Rc::new(api.expect("every fake export resolves"))
}

fn fail(name: &'static str, occurrence: usize, result: CUresult) {
    with_fake(|fake| {
        fake.failures.insert((name, occurrence), result);
    });
}

fn report_foreign_context_on_pop(occurrence: usize) {
    with_fake(|fake| fake.foreign_pops.push(occurrence));
}

/// The log so far, emptied.
fn take_log() -> Vec<String> {
    with_fake(|fake| core::mem::take(&mut fake.log))
}

/// Asserts the log since the last look is exactly `expected`, and empties it.
#[track_caller]
fn expect_log(expected: &[&str]) {
    assert_eq!(take_log(), expected);
}

/// The log lines around a child call that pushed and popped `ctx2` cleanly.
const PUSH_CTX2: &str = "cuCtxPushCurrent_v2 ctx2";
const POP_CTX2: &str = "cuCtxPopCurrent_v2 -> ctx2";

/// A pop the fake failed left the context on its stack; takes it off, so
/// the next call starts from the caller's stack again.
fn discard_context_left_by_failed_pop() {
    with_fake(|fake| fake.stack.pop());
}

fn stack() -> Vec<String> {
    with_fake(|fake| fake.stack.iter().map(|&c| fake.label(c)).collect())
}

fn live_resources() -> (usize, usize, usize) {
    with_fake(|fake| {
        (
            fake.live_contexts.len() - 1,
            fake.live_streams.len(),
            fake.live_allocations.len(),
        )
    })
}

fn error(operation: &'static str, result: CUresult) -> CudaError {
    CudaError::new(operation, result)
}

fn refusal(operation: &'static str) -> CudaError {
    CudaError::new(operation, -1)
}

/// A result with its error as the error's contract string (`operation()`).
fn by_operation<T>(result: Result<T, CudaError>) -> Result<T, &'static str> {
    result.map_err(|error| {
        assert!(error.is_runtime_refusal(), "{error}");
        error.operation()
    })
}

/// A context (`ctx2`) on device 40 (ordinal 0) with the log emptied.
fn context(api: &Rc<DriverApi>) -> Context {
    let context = Context::create(Rc::clone(api), 40).expect("context");
    take_log();
    context
}

/// A fresh fake and [`context`] on it. Keep the table alive for the whole
/// test (`_api`), as a host would, so "image dropped" never enters the log
/// when the context goes.
fn fresh_context() -> (Rc<DriverApi>, Context) {
    let api = fresh_api();
    let context = context(&api);
    (api, context)
}

/// [`fresh_context`] and its stream (`stream3`), with the log emptied.
fn fresh_stream() -> (Rc<DriverApi>, Context, Stream) {
    let (api, context) = fresh_context();
    let stream = context.create_stream().expect("stream");
    take_log();
    (api, context, stream)
}

// The symbol table.

/// The listed exports that are required (`true`) or optional (`false`).
fn exports_of_tier(required: bool) -> impl Iterator<Item = &'static CStr> {
    DRIVER_EXPORT_NAMES
        .into_iter()
        .zip(DRIVER_EXPORT_REQUIRED)
        .filter_map(move |(name, tier)| (tier == required).then_some(name))
}

/// The table resolved from fakes for every export except `missing`.
fn resolve_without(missing: &CStr) -> Result<DriverApi, MissingSymbol> {
    // SAFETY: every resolved fake has exactly the listed signature.
    unsafe {
        DriverApi::resolve((), |_, name| {
            if name == missing {
                None
            } else {
                fake_symbol(name)
            }
        })
    }
}

#[test]
fn missing_symbol_names_the_missing_export() {
    for missing in exports_of_tier(true) {
        let Err(error) = resolve_without(missing) else {
            panic!("resolve succeeded without {missing:?}");
        };
        assert_eq!(error.export_name, missing.to_str().unwrap());
        assert!(error.to_string().contains(error.export_name));
    }
}

#[test]
fn a_missing_optional_export_still_loads() {
    for missing in exports_of_tier(false) {
        let api = resolve_without(missing).expect("a missing optional export still loads");
        let absent = api.unavailable();
        let names: Vec<&str> = absent.iter().map(|absent| absent.export_name).collect();
        assert_eq!(names, [missing.to_str().unwrap()]);
        assert!(absent[0].to_string().contains(names[0]));
    }
}

#[test]
fn resolve_asks_for_every_export_in_list_order() {
    let mut asked = Vec::new();
    // SAFETY: every resolved fake has exactly the listed signature.
    let api = unsafe {
        DriverApi::resolve((), |_, name| {
            asked.push(name);
            fake_symbol(name)
        })
    };
    assert!(api.is_ok());
    assert_eq!(asked, DRIVER_EXPORT_NAMES);
}

#[test]
fn failed_resolve_drops_the_image_once() {
    fresh_api();
    take_log();
    // SAFETY: every resolved fake has exactly the listed signature.
    let outcome = unsafe { DriverApi::resolve(FakeImage, |_, _| None) };
    assert!(outcome.is_err());
    expect_log(&["image dropped"]);
}

// initialize and device_get.

#[test]
fn initialize_calls_cu_init_with_zero() {
    let api = fresh_api();
    assert_eq!(initialize(&api), Ok(()));
    expect_log(&["cuInit flags=0"]);
    fail("cuInit", 2, 100);
    assert_eq!(initialize(&api), Err(error("cuInit", 100)));
}

#[test]
fn device_get_returns_the_driver_device() {
    let api = fresh_api();
    assert_eq!(device_get(&api, 1), Ok(41));
    expect_log(&["cuDeviceGet ordinal=1"]);
    fail("cuDeviceGet", 2, 101);
    assert_eq!(device_get(&api, 7), Err(error("cuDeviceGet", 101)));
}

// Context creation.

#[test]
fn context_create_pops_and_restores_the_callers_stack() {
    let api = fresh_api();
    let context = Context::create(Rc::clone(&api), 40).unwrap();
    expect_log(&[
        "cuCtxCreate_v2 flags=0 device=40 -> ctx2",
        "cuCtxPopCurrent_v2 -> ctx2",
    ]);
    assert_eq!(stack(), [CALLER_CONTEXT]);
    assert_eq!(context.device(), 40);
    assert_eq!(context.raw_handle().addr(), 0x200);
    assert_eq!(context.live_children(), 0);
}

#[test]
fn context_create_failure_makes_no_other_call() {
    let api = fresh_api();
    fail("cuCtxCreate_v2", 1, CUDA_ERROR_OUT_OF_MEMORY);
    let outcome = Context::create(Rc::clone(&api), 40);
    assert_eq!(
        outcome.unwrap_err(),
        error("cuCtxCreate_v2", CUDA_ERROR_OUT_OF_MEMORY)
    );
    expect_log(&["cuCtxCreate_v2 flags=0 device=40 -> error 2"]);
    assert_eq!(stack(), [CALLER_CONTEXT]);
}

#[test]
fn context_create_destroys_the_context_when_the_pop_fails() {
    let api = fresh_api();
    fail("cuCtxPopCurrent_v2", 1, CUDA_ERROR_INVALID_CONTEXT);
    let outcome = Context::create(Rc::clone(&api), 40);
    assert_eq!(
        outcome.unwrap_err(),
        error("cuCtxPopCurrent_v2", CUDA_ERROR_INVALID_CONTEXT)
    );
    expect_log(&[
        "cuCtxCreate_v2 flags=0 device=40 -> ctx2",
        "cuCtxPopCurrent_v2 -> error 201",
        "cuCtxDestroy_v2 ctx2",
    ]);
    assert_eq!(stack(), [CALLER_CONTEXT]);
    assert_eq!(live_resources(), (0, 0, 0));
}

#[test]
fn context_create_destroys_the_context_when_the_pop_returns_another() {
    let api = fresh_api();
    report_foreign_context_on_pop(1);
    let outcome = Context::create(Rc::clone(&api), 40);
    assert_eq!(
        outcome.unwrap_err(),
        refusal("cuCtxPopCurrent_v2:wrong-context")
    );
    expect_log(&[
        "cuCtxCreate_v2 flags=0 device=40 -> ctx2",
        "cuCtxPopCurrent_v2 -> foreign3",
        "cuCtxDestroy_v2 ctx2",
    ]);
    assert_eq!(live_resources(), (0, 0, 0));
}

// Streams.

#[test]
fn stream_create_synchronize_close_push_run_pop() {
    let (_api, context) = fresh_context();
    let stream = context.create_stream().unwrap();
    assert_eq!(context.live_children(), 1);
    stream.synchronize().unwrap();
    stream.close().unwrap();
    expect_log(&[
        PUSH_CTX2,
        "cuStreamCreate flags=1 in ctx2 -> stream3",
        POP_CTX2,
        PUSH_CTX2,
        "cuStreamSynchronize stream3 in ctx2",
        POP_CTX2,
        PUSH_CTX2,
        "cuStreamDestroy_v2 stream3 in ctx2",
        POP_CTX2,
    ]);
    assert_eq!(context.live_children(), 0);
    assert_eq!(stack(), [CALLER_CONTEXT]);
}

#[test]
fn stream_create_push_failure_skips_create_and_pop() {
    let (_api, context) = fresh_context();
    fail("cuCtxPushCurrent_v2", 1, CUDA_ERROR_INVALID_CONTEXT);
    let outcome = context.create_stream();
    assert_eq!(
        outcome.unwrap_err(),
        error("cuCtxPushCurrent_v2", CUDA_ERROR_INVALID_CONTEXT)
    );
    expect_log(&["cuCtxPushCurrent_v2 ctx2 -> error 201"]);
    assert_eq!(context.live_children(), 0);
}

#[test]
fn stream_create_failure_still_pops() {
    let (_api, context) = fresh_context();
    fail("cuStreamCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
    let outcome = context.create_stream();
    assert_eq!(
        outcome.unwrap_err(),
        error("cuStreamCreate", CUDA_ERROR_OUT_OF_MEMORY)
    );
    expect_log(&[
        PUSH_CTX2,
        "cuStreamCreate flags=1 in ctx2 -> error 2",
        POP_CTX2,
    ]);
    assert_eq!(stack(), [CALLER_CONTEXT]);
    assert_eq!(context.live_children(), 0);
}

#[test]
fn stream_create_reports_its_own_failure_when_the_pop_fails_too() {
    let (_api, context) = fresh_context();
    fail("cuStreamCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
    fail("cuCtxPopCurrent_v2", 2, CUDA_ERROR_INVALID_CONTEXT);
    let outcome = context.create_stream();
    assert_eq!(
        outcome.unwrap_err(),
        error("cuStreamCreate", CUDA_ERROR_OUT_OF_MEMORY)
    );
    expect_log(&[
        PUSH_CTX2,
        "cuStreamCreate flags=1 in ctx2 -> error 2",
        "cuCtxPopCurrent_v2 -> error 201",
    ]);
}

#[test]
fn stream_create_pop_failure_releases_the_new_stream() {
    let (_api, context) = fresh_context();
    fail("cuCtxPopCurrent_v2", 2, CUDA_ERROR_INVALID_CONTEXT);
    let outcome = context.create_stream();
    assert_eq!(
        outcome.unwrap_err(),
        error("cuCtxPopCurrent_v2", CUDA_ERROR_INVALID_CONTEXT)
    );
    expect_log(&[
        PUSH_CTX2,
        "cuStreamCreate flags=1 in ctx2 -> stream3",
        "cuCtxPopCurrent_v2 -> error 201",
        PUSH_CTX2,
        "cuStreamDestroy_v2 stream3 in ctx2",
        POP_CTX2,
    ]);
    assert_eq!(context.live_children(), 0);
    assert_eq!(live_resources(), (1, 0, 0));
}

#[test]
fn stream_create_wrong_context_pop_releases_the_new_stream() {
    let (_api, context) = fresh_context();
    report_foreign_context_on_pop(2);
    let outcome = context.create_stream();
    assert_eq!(
        outcome.unwrap_err(),
        refusal("cuCtxPopCurrent_v2:wrong-context")
    );
    expect_log(&[
        PUSH_CTX2,
        "cuStreamCreate flags=1 in ctx2 -> stream3",
        "cuCtxPopCurrent_v2 -> foreign4",
        PUSH_CTX2,
        "cuStreamDestroy_v2 stream3 in ctx2",
        POP_CTX2,
    ]);
    assert_eq!(live_resources(), (1, 0, 0));
}

#[test]
fn stream_create_pop_failure_abandons_the_stream_when_the_release_push_fails() {
    let (_api, context) = fresh_context();
    fail("cuCtxPopCurrent_v2", 2, CUDA_ERROR_INVALID_CONTEXT);
    fail("cuCtxPushCurrent_v2", 2, CUDA_ERROR_INVALID_CONTEXT);
    let outcome = context.create_stream();
    assert_eq!(
        outcome.unwrap_err(),
        error("cuCtxPopCurrent_v2", CUDA_ERROR_INVALID_CONTEXT)
    );
    expect_log(&[
        PUSH_CTX2,
        "cuStreamCreate flags=1 in ctx2 -> stream3",
        "cuCtxPopCurrent_v2 -> error 201",
        "cuCtxPushCurrent_v2 ctx2 -> error 201",
    ]);
    assert_eq!(context.live_children(), 0);
}

#[test]
fn stream_synchronize_failures() {
    let (_api, context, stream) = fresh_stream();

    fail("cuStreamSynchronize", 1, 700);
    assert_eq!(stream.synchronize(), Err(error("cuStreamSynchronize", 700)));
    expect_log(&[
        PUSH_CTX2,
        "cuStreamSynchronize stream3 in ctx2 -> error 700",
        POP_CTX2,
    ]);

    fail("cuCtxPushCurrent_v2", 3, CUDA_ERROR_INVALID_CONTEXT);
    assert_eq!(
        stream.synchronize(),
        Err(error("cuCtxPushCurrent_v2", CUDA_ERROR_INVALID_CONTEXT))
    );
    expect_log(&["cuCtxPushCurrent_v2 ctx2 -> error 201"]);

    fail("cuCtxPopCurrent_v2", 4, CUDA_ERROR_INVALID_CONTEXT);
    assert_eq!(
        stream.synchronize(),
        Err(error("cuCtxPopCurrent_v2", CUDA_ERROR_INVALID_CONTEXT))
    );
    expect_log(&[
        PUSH_CTX2,
        "cuStreamSynchronize stream3 in ctx2",
        "cuCtxPopCurrent_v2 -> error 201",
    ]);
    discard_context_left_by_failed_pop();

    report_foreign_context_on_pop(5);
    assert_eq!(
        stream.synchronize(),
        Err(refusal("cuCtxPopCurrent_v2:wrong-context"))
    );
    take_log();

    // Still owned and usable after every failure.
    assert_eq!(stream.synchronize(), Ok(()));
    assert_eq!(context.live_children(), 1);
}

#[test]
fn stream_destroy_failure_is_reported_once_and_not_retried() {
    let (_api, context, stream) = fresh_stream();
    fail("cuStreamDestroy_v2", 1, CUDA_ERROR_INVALID_HANDLE);
    assert_eq!(
        stream.close(),
        Err(error("cuStreamDestroy_v2", CUDA_ERROR_INVALID_HANDLE))
    );
    expect_log(&[
        PUSH_CTX2,
        "cuStreamDestroy_v2 stream3 in ctx2 -> error 400",
        POP_CTX2,
    ]);
    assert_eq!(context.live_children(), 0);
    drop(context);
    expect_log(&["cuCtxDestroy_v2 ctx2 WITH LIVE CHILDREN"]);
}

#[test]
fn stream_close_push_failure_abandons_the_stream() {
    let (_api, context, stream) = fresh_stream();
    fail("cuCtxPushCurrent_v2", 2, CUDA_ERROR_INVALID_CONTEXT);
    assert_eq!(
        stream.close(),
        Err(error("cuCtxPushCurrent_v2", CUDA_ERROR_INVALID_CONTEXT))
    );
    expect_log(&["cuCtxPushCurrent_v2 ctx2 -> error 201"]);
    assert_eq!(context.live_children(), 0);
}

#[test]
fn stream_close_pop_failure_is_reported_after_the_destroy() {
    let (_api, _context, stream) = fresh_stream();
    fail("cuCtxPopCurrent_v2", 3, CUDA_ERROR_INVALID_CONTEXT);
    assert_eq!(
        stream.close(),
        Err(error("cuCtxPopCurrent_v2", CUDA_ERROR_INVALID_CONTEXT))
    );
    expect_log(&[
        PUSH_CTX2,
        "cuStreamDestroy_v2 stream3 in ctx2",
        "cuCtxPopCurrent_v2 -> error 201",
    ]);
    assert_eq!(live_resources(), (1, 0, 0));
}

#[test]
fn stream_drop_destroys_exactly_once() {
    let (_api, context, stream) = fresh_stream();
    drop(stream);
    expect_log(&[PUSH_CTX2, "cuStreamDestroy_v2 stream3 in ctx2", POP_CTX2]);
    // A failing destroy on drop is ignored and not retried either.
    let stream = context.create_stream().unwrap();
    take_log();
    fail("cuStreamDestroy_v2", 2, CUDA_ERROR_INVALID_HANDLE);
    drop(stream);
    expect_log(&[
        PUSH_CTX2,
        "cuStreamDestroy_v2 stream4 in ctx2 -> error 400",
        POP_CTX2,
    ]);
    assert_eq!(context.live_children(), 0);
}

// Allocations.

#[test]
fn allocate_and_close_push_run_pop() {
    let (_api, context) = fresh_context();
    let allocation = context.allocate(64).unwrap();
    assert_eq!(allocation.byte_size(), 64);
    assert_eq!(allocation.device_pointer(), 0x300);
    assert_eq!(context.live_children(), 1);
    allocation.close().unwrap();
    expect_log(&[
        PUSH_CTX2,
        "cuMemAlloc_v2 64 in ctx2 -> mem3",
        POP_CTX2,
        PUSH_CTX2,
        "cuMemFree_v2 mem3 in ctx2",
        POP_CTX2,
    ]);
    assert_eq!(context.live_children(), 0);
    assert_eq!(stack(), [CALLER_CONTEXT]);
}

#[test]
fn zero_byte_allocation_makes_no_driver_call() {
    let (_api, context) = fresh_context();
    let outcome = context.allocate(0);
    assert_eq!(outcome.unwrap_err().operation(), "cuMemAlloc_v2:zero-bytes");
    expect_log(&[]);
    assert_eq!(context.live_children(), 0);
}

#[test]
fn allocate_failures() {
    let (_api, context) = fresh_context();

    fail("cuCtxPushCurrent_v2", 1, CUDA_ERROR_INVALID_CONTEXT);
    assert_eq!(
        context.allocate(8).unwrap_err(),
        error("cuCtxPushCurrent_v2", CUDA_ERROR_INVALID_CONTEXT)
    );
    expect_log(&["cuCtxPushCurrent_v2 ctx2 -> error 201"]);

    fail("cuMemAlloc_v2", 1, CUDA_ERROR_OUT_OF_MEMORY);
    assert_eq!(
        context.allocate(8).unwrap_err(),
        error("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY)
    );
    expect_log(&[PUSH_CTX2, "cuMemAlloc_v2 8 in ctx2 -> error 2", POP_CTX2]);

    fail("cuCtxPopCurrent_v2", 3, CUDA_ERROR_INVALID_CONTEXT);
    assert_eq!(
        context.allocate(8).unwrap_err(),
        error("cuCtxPopCurrent_v2", CUDA_ERROR_INVALID_CONTEXT)
    );
    expect_log(&[
        PUSH_CTX2,
        "cuMemAlloc_v2 8 in ctx2 -> mem3",
        "cuCtxPopCurrent_v2 -> error 201",
        PUSH_CTX2,
        "cuMemFree_v2 mem3 in ctx2",
        POP_CTX2,
    ]);
    discard_context_left_by_failed_pop();

    report_foreign_context_on_pop(5);
    assert_eq!(
        context.allocate(8).unwrap_err(),
        refusal("cuCtxPopCurrent_v2:wrong-context")
    );
    expect_log(&[
        PUSH_CTX2,
        "cuMemAlloc_v2 8 in ctx2 -> mem4",
        "cuCtxPopCurrent_v2 -> foreign5",
        PUSH_CTX2,
        "cuMemFree_v2 mem4 in ctx2",
        POP_CTX2,
    ]);
    assert_eq!(context.live_children(), 0);
    assert_eq!(live_resources(), (1, 0, 0));
}

#[test]
fn free_failure_is_reported_once_and_not_retried() {
    let (_api, context) = fresh_context();
    let allocation = context.allocate(64).unwrap();
    take_log();
    fail("cuMemFree_v2", 1, CUDA_ERROR_INVALID_HANDLE);
    assert_eq!(
        allocation.close(),
        Err(error("cuMemFree_v2", CUDA_ERROR_INVALID_HANDLE))
    );
    expect_log(&[
        PUSH_CTX2,
        "cuMemFree_v2 mem3 in ctx2 -> error 400",
        POP_CTX2,
    ]);
    assert_eq!(context.live_children(), 0);
}

#[test]
fn allocation_close_push_and_pop_failures() {
    let (_api, context) = fresh_context();
    let first = context.allocate(64).unwrap();
    let second = context.allocate(64).unwrap();
    take_log();
    fail("cuCtxPushCurrent_v2", 3, CUDA_ERROR_INVALID_CONTEXT);
    assert_eq!(
        first.close(),
        Err(error("cuCtxPushCurrent_v2", CUDA_ERROR_INVALID_CONTEXT))
    );
    expect_log(&["cuCtxPushCurrent_v2 ctx2 -> error 201"]);
    fail("cuCtxPopCurrent_v2", 4, CUDA_ERROR_INVALID_CONTEXT);
    assert_eq!(
        second.close(),
        Err(error("cuCtxPopCurrent_v2", CUDA_ERROR_INVALID_CONTEXT))
    );
    expect_log(&[
        PUSH_CTX2,
        "cuMemFree_v2 mem4 in ctx2",
        "cuCtxPopCurrent_v2 -> error 201",
    ]);
    assert_eq!(context.live_children(), 0);
}

#[test]
fn allocation_drop_frees_exactly_once() {
    let (_api, context) = fresh_context();
    let allocation = context.allocate(64).unwrap();
    take_log();
    drop(allocation);
    expect_log(&[PUSH_CTX2, "cuMemFree_v2 mem3 in ctx2", POP_CTX2]);
}

// Moving bytes.

/// Work enqueued on any fake stream and not yet run.
fn pending_work() -> usize {
    with_fake(|fake| fake.pending.values().map(Vec::len).sum())
}

/// [`fresh_stream`] and a `byte_size`-byte allocation (`mem4`), with the
/// log emptied.
fn fresh_allocation(byte_size: usize) -> (Rc<DriverApi>, Context, Stream, DeviceAllocation) {
    let (api, context, stream) = fresh_stream();
    let allocation = context.allocate(byte_size).expect("allocation");
    take_log();
    (api, context, stream, allocation)
}

/// The whole allocation, read back through the stream.
fn read_all(stream: &Stream, allocation: &DeviceAllocation) -> Vec<u8> {
    let mut bytes = vec![0; allocation.byte_size()];
    stream
        .copy_from_device(allocation, 0, &mut bytes)
        .expect("read back");
    take_log();
    bytes
}

#[test]
fn fill_copy_in_and_copy_back_enqueue_synchronize_and_pop() {
    let (_api, context, stream, mut allocation) = fresh_allocation(64);
    stream.fill(&mut allocation, 0).unwrap();
    expect_log(&[
        PUSH_CTX2,
        "cuMemsetD8Async mem4+0 64 on stream3 in ctx2",
        "cuStreamSynchronize stream3 in ctx2",
        POP_CTX2,
    ]);
    let pattern: Vec<u8> = (1..=16).collect();
    stream.copy_to_device(&mut allocation, 8, &pattern).unwrap();
    expect_log(&[
        PUSH_CTX2,
        "cuMemcpyHtoDAsync_v2 mem4+8 16 on stream3 in ctx2",
        "cuStreamSynchronize stream3 in ctx2",
        POP_CTX2,
    ]);
    let mut back = [0xFF_u8; 24];
    stream.copy_from_device(&allocation, 4, &mut back).unwrap();
    expect_log(&[
        PUSH_CTX2,
        "cuMemcpyDtoHAsync_v2 mem4+4 24 on stream3 in ctx2",
        "cuStreamSynchronize stream3 in ctx2",
        POP_CTX2,
    ]);
    // The fake runs the work only at the synchronize: these bytes prove it ran.
    let mut expected = vec![0_u8; 4];
    expected.extend(1..=16_u8);
    expected.extend([0; 4]);
    assert_eq!(back[..], expected[..]);
    assert_eq!(pending_work(), 0);
    assert_eq!(stack(), [CALLER_CONTEXT]);
    assert_eq!(context.live_children(), 2);
}

#[test]
fn fill_sets_every_byte_and_copies_reach_both_ends() {
    let (_api, _context, stream, mut allocation) = fresh_allocation(4096);
    assert_eq!(read_all(&stream, &allocation), [FRESH_DEVICE_BYTE; 4096]);
    stream.fill(&mut allocation, 0xAB).unwrap();
    assert_eq!(read_all(&stream, &allocation), [0xAB; 4096]);
    let pattern: Vec<u8> = (0..4096_usize)
        .map(|index| (index % 251) as u8 + 1)
        .collect();
    stream.copy_to_device(&mut allocation, 0, &pattern).unwrap();
    assert_eq!(read_all(&stream, &allocation), pattern);
    stream.copy_to_device(&mut allocation, 4095, &[7]).unwrap();
    let mut last = [0];
    stream
        .copy_from_device(&allocation, 4095, &mut last)
        .unwrap();
    assert_eq!(last, [7]);
}

#[test]
fn copies_outside_the_allocation_make_no_driver_call() {
    let (_api, _context, stream, mut allocation) = fresh_allocation(64);
    let to_device = "cuMemcpyHtoDAsync_v2:out-of-range";
    let from_device = "cuMemcpyDtoHAsync_v2:out-of-range";
    for (offset, length) in [
        (0, 65),
        (1, 64),
        (64, 1),
        (63, 2),
        (usize::MAX, 1),
        (1, usize::MAX),
    ] {
        // A length past the host's memory cannot be a slice: those ranges
        // are checked through the same arithmetic by the shorter lengths.
        let length = length.min(128);
        let bytes = vec![0_u8; length];
        let mut back = vec![0_u8; length];
        assert_eq!(
            by_operation(stream.copy_to_device(&mut allocation, offset, &bytes)),
            Err(to_device),
            "{offset} {length}"
        );
        assert_eq!(
            by_operation(stream.copy_from_device(&allocation, offset, &mut back)),
            Err(from_device),
            "{offset} {length}"
        );
    }
    expect_log(&[]);
    // The last byte is inside.
    assert_eq!(stream.copy_to_device(&mut allocation, 63, &[1]), Ok(()));
}

#[test]
fn empty_copies_make_no_driver_call() {
    let (_api, _context, stream, mut allocation) = fresh_allocation(64);
    for offset in [0, 64, usize::MAX] {
        assert_eq!(
            by_operation(stream.copy_to_device(&mut allocation, offset, &[])),
            Err("cuMemcpyHtoDAsync_v2:empty")
        );
        assert_eq!(
            by_operation(stream.copy_from_device(&allocation, offset, &mut [])),
            Err("cuMemcpyDtoHAsync_v2:empty")
        );
    }
    expect_log(&[]);
}

#[test]
fn a_stream_and_an_allocation_of_different_contexts_make_no_driver_call() {
    let api = fresh_api();
    let first = context(&api);
    let second = context(&api);
    let stream = first.create_stream().unwrap();
    let mut foreign = second.allocate(64).unwrap();
    take_log();
    // The context check comes first, whatever else is wrong.
    assert_eq!(
        by_operation(stream.copy_to_device(&mut foreign, 0, &[1; 8])),
        Err("cuMemcpyHtoDAsync_v2:other-context")
    );
    assert_eq!(
        by_operation(stream.copy_to_device(&mut foreign, 64, &[])),
        Err("cuMemcpyHtoDAsync_v2:other-context")
    );
    assert_eq!(
        by_operation(stream.copy_from_device(&foreign, 0, &mut [0; 8])),
        Err("cuMemcpyDtoHAsync_v2:other-context")
    );
    assert_eq!(
        by_operation(stream.copy_from_device(&foreign, 100, &mut [0; 8])),
        Err("cuMemcpyDtoHAsync_v2:other-context")
    );
    assert_eq!(
        by_operation(stream.fill(&mut foreign, 0)),
        Err("cuMemsetD8Async:other-context")
    );
    expect_log(&[]);
}

#[test]
fn a_failed_enqueue_skips_the_synchronize_and_still_pops() {
    let (_api, _context, stream, mut allocation) = fresh_allocation(64);
    fail("cuMemcpyHtoDAsync_v2", 1, CUDA_ERROR_INVALID_HANDLE);
    assert_eq!(
        stream.copy_to_device(&mut allocation, 0, &[1; 4]),
        Err(error("cuMemcpyHtoDAsync_v2", CUDA_ERROR_INVALID_HANDLE))
    );
    expect_log(&[
        PUSH_CTX2,
        "cuMemcpyHtoDAsync_v2 mem4+0 4 on stream3 in ctx2 -> error 400",
        POP_CTX2,
    ]);
    fail("cuMemcpyDtoHAsync_v2", 1, 700);
    assert_eq!(
        stream.copy_from_device(&allocation, 0, &mut [0; 4]),
        Err(error("cuMemcpyDtoHAsync_v2", 700))
    );
    expect_log(&[
        PUSH_CTX2,
        "cuMemcpyDtoHAsync_v2 mem4+0 4 on stream3 in ctx2 -> error 700",
        POP_CTX2,
    ]);
    fail("cuMemsetD8Async", 1, 700);
    assert_eq!(
        stream.fill(&mut allocation, 0),
        Err(error("cuMemsetD8Async", 700))
    );
    expect_log(&[
        PUSH_CTX2,
        "cuMemsetD8Async mem4+0 64 on stream3 in ctx2 -> error 700",
        POP_CTX2,
    ]);
    assert_eq!(pending_work(), 0);
    assert_eq!(stack(), [CALLER_CONTEXT]);
}

#[test]
fn copy_push_synchronize_and_pop_failures() {
    let (_api, _context, stream, mut allocation) = fresh_allocation(64);

    // Pushes so far: stream create and allocate; pops: those and the
    // context create's.
    fail("cuCtxPushCurrent_v2", 3, CUDA_ERROR_INVALID_CONTEXT);
    assert_eq!(
        stream.copy_to_device(&mut allocation, 0, &[1; 4]),
        Err(error("cuCtxPushCurrent_v2", CUDA_ERROR_INVALID_CONTEXT))
    );
    expect_log(&["cuCtxPushCurrent_v2 ctx2 -> error 201"]);

    fail("cuStreamSynchronize", 1, 700);
    assert_eq!(
        stream.copy_to_device(&mut allocation, 0, &[1; 4]),
        Err(error("cuStreamSynchronize", 700))
    );
    expect_log(&[
        PUSH_CTX2,
        "cuMemcpyHtoDAsync_v2 mem4+0 4 on stream3 in ctx2",
        "cuStreamSynchronize stream3 in ctx2 -> error 700",
        POP_CTX2,
    ]);
    // The next synchronize runs what the failed one left.
    stream.synchronize().unwrap();
    take_log();

    fail("cuCtxPopCurrent_v2", 6, CUDA_ERROR_INVALID_CONTEXT);
    let mut back = [0; 4];
    assert_eq!(
        stream.copy_from_device(&allocation, 0, &mut back),
        Err(error("cuCtxPopCurrent_v2", CUDA_ERROR_INVALID_CONTEXT))
    );
    expect_log(&[
        PUSH_CTX2,
        "cuMemcpyDtoHAsync_v2 mem4+0 4 on stream3 in ctx2",
        "cuStreamSynchronize stream3 in ctx2",
        "cuCtxPopCurrent_v2 -> error 201",
    ]);
    discard_context_left_by_failed_pop();
    // The copy itself completed before the pop failed.
    assert_eq!(back, [1; 4]);

    report_foreign_context_on_pop(7);
    assert_eq!(
        stream.fill(&mut allocation, 0),
        Err(refusal("cuCtxPopCurrent_v2:wrong-context"))
    );
    take_log();
    assert_eq!(pending_work(), 0);
}

// Context release.

#[test]
fn context_close_destroys_once() {
    let (_api, context) = fresh_context();
    assert_eq!(context.close(), Ok(()));
    expect_log(&["cuCtxDestroy_v2 ctx2"]);
    assert_eq!(live_resources(), (0, 0, 0));
}

#[test]
fn context_drop_destroys_once() {
    let (_api, context) = fresh_context();
    drop(context);
    expect_log(&["cuCtxDestroy_v2 ctx2"]);
}

#[test]
fn context_destroy_failure_is_reported_once_and_not_retried() {
    let (api, context) = fresh_context();
    fail("cuCtxDestroy_v2", 1, CUDA_ERROR_INVALID_CONTEXT);
    assert_eq!(
        context.close(),
        Err(error("cuCtxDestroy_v2", CUDA_ERROR_INVALID_CONTEXT))
    );
    drop(api);
    expect_log(&["cuCtxDestroy_v2 ctx2 -> error 201", "image dropped"]);
}

#[test]
fn context_close_with_live_children_defers_the_destroy_to_the_last_child() {
    let (_api, context) = fresh_context();
    let stream = context.create_stream().unwrap();
    let allocation = context.allocate(16).unwrap();
    take_log();
    assert_eq!(
        by_operation(context.close()),
        Err("cuCtxDestroy_v2:children-live")
    );
    expect_log(&[]);
    stream.close().unwrap();
    expect_log(&[PUSH_CTX2, "cuStreamDestroy_v2 stream3 in ctx2", POP_CTX2]);
    drop(allocation);
    expect_log(&[
        PUSH_CTX2,
        "cuMemFree_v2 mem4 in ctx2",
        POP_CTX2,
        "cuCtxDestroy_v2 ctx2",
    ]);
    assert_eq!(live_resources(), (0, 0, 0));
}

#[test]
fn release_order_is_allocation_stream_then_context() {
    let api = fresh_api();
    {
        let context = context(&api);
        let _stream = context.create_stream().unwrap();
        let _allocation = context.allocate(32).unwrap();
        take_log();
        // Scope end drops in reverse declaration order.
    }
    expect_log(&[
        PUSH_CTX2,
        "cuMemFree_v2 mem4 in ctx2",
        POP_CTX2,
        PUSH_CTX2,
        "cuStreamDestroy_v2 stream3 in ctx2",
        POP_CTX2,
        "cuCtxDestroy_v2 ctx2",
    ]);
}

#[test]
fn context_is_destroyed_after_its_children_whatever_the_drop_order() {
    let (_api, context) = fresh_context();
    let stream = context.create_stream().unwrap();
    let allocation = context.allocate(32).unwrap();
    take_log();
    drop(context);
    drop(stream);
    drop(allocation);
    let log = take_log();
    assert_eq!(log.last().unwrap(), "cuCtxDestroy_v2 ctx2");
    assert_eq!(
        log.iter()
            .filter(|c| c.starts_with("cuCtxDestroy_v2"))
            .count(),
        1
    );
    assert_eq!(live_resources(), (0, 0, 0));
}

#[test]
fn the_image_is_dropped_only_after_the_last_resource() {
    let api = fresh_api();
    let context = Context::create(api, 40).unwrap();
    let stream = context.create_stream().unwrap();
    let allocation = context.allocate(32).unwrap();
    drop(context);
    drop(allocation);
    assert!(!take_log().iter().any(|c| c == "image dropped"));
    drop(stream);
    let log = take_log();
    assert_eq!(
        log[log.len() - 2..],
        ["cuCtxDestroy_v2 ctx2", "image dropped"]
    );
    assert_eq!(log.iter().filter(|c| *c == "image dropped").count(), 1);
}

#[test]
fn pushes_and_pops_balance_and_the_callers_stack_is_restored() {
    let api = fresh_api();
    initialize(&api).unwrap();
    let device = device_get(&api, 0).unwrap();
    let context = Context::create(Rc::clone(&api), device).unwrap();
    let stream = context.create_stream().unwrap();
    let allocation = context.allocate(1 << 20).unwrap();
    stream.synchronize().unwrap();
    allocation.close().unwrap();
    stream.close().unwrap();
    context.close().unwrap();
    let log = take_log();
    let count = |prefix: &str| log.iter().filter(|c| c.starts_with(prefix)).count();
    assert_eq!(count("cuCtxPushCurrent_v2"), 5);
    // One more pop than push: the one right after cuCtxCreate_v2.
    assert_eq!(count("cuCtxPopCurrent_v2"), 6);
    assert_eq!(count("cuCtxCreate_v2"), 1);
    assert_eq!(count("cuCtxDestroy_v2"), 1);
    assert!(log
        .iter()
        .filter(|c| c.starts_with("cuStream") || c.starts_with("cuMem"))
        .all(|c| c.contains(" in ctx2")));
    assert_eq!(stack(), [CALLER_CONTEXT]);
    assert_eq!(live_resources(), (0, 0, 0));
}

// Errors and formatting.

#[test]
fn cuda_error_carries_only_the_operation_and_the_result() {
    let driver = error("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY);
    assert_eq!(driver.operation(), "cuMemAlloc_v2");
    assert_eq!(driver.result(), 2);
    assert!(!driver.is_runtime_refusal());
    assert_eq!(
        driver.to_string(),
        "cuMemAlloc_v2 failed with CUDA result 2 (CUDA_ERROR_OUT_OF_MEMORY)"
    );
    let refused = refusal("cuCtxPopCurrent_v2:wrong-context");
    assert!(refused.is_runtime_refusal());
    assert_eq!(refused.result(), CudaError::RUNTIME_REFUSAL);
    assert_eq!(refused.result_name(), None);
    assert_eq!(
        refused.to_string(),
        "cuCtxPopCurrent_v2:wrong-context failed with CUDA result -1 \
         (refused by the runtime, no driver call failed)"
    );
    let boxed: Box<dyn std::error::Error> = Box::new(refused);
    assert!(boxed.source().is_none());
}

/// `?` in `fn main() -> Result<(), Box<dyn Error>>` prints the error's
/// `Debug`: it reads as `Display` does, with the result's cuda.h name.
#[test]
fn cuda_error_debug_under_question_mark_names_the_result() {
    fn host() -> Result<(), Box<dyn std::error::Error>> {
        Err(error("cuInit", 100))?;
        Ok(())
    }
    let shown = format!("{:?}", host().unwrap_err());
    assert_eq!(
        shown,
        "cuInit failed with CUDA result 100 (CUDA_ERROR_NO_DEVICE)"
    );
    let unknown = error("cuInit", 12345);
    assert_eq!(unknown.result_name(), None);
    assert_eq!(
        format!("{unknown:?}"),
        "cuInit failed with CUDA result 12345 (a value cuda.h does not define)"
    );
    let operating_system = error("cuInit", 304);
    assert_eq!(
        operating_system.result_name(),
        Some("CUDA_ERROR_OPERATING_SYSTEM")
    );
    assert_eq!(
        format!("{operating_system:?}"),
        operating_system.to_string()
    );
}

/// A refused method is named by what a person called, with its numbers,
/// and says no driver call was made; `operation()` keeps the contract string.
#[test]
fn a_runtime_refusal_names_the_method_and_its_numbers() {
    let (_api, context, stream, mut allocation) = fresh_allocation(4096);
    let out_of_range = stream
        .copy_to_device(&mut allocation, 4000, &[0; 200])
        .unwrap_err();
    assert_eq!(
        out_of_range.operation(),
        "cuMemcpyHtoDAsync_v2:out-of-range"
    );
    assert_eq!(
        out_of_range.to_string(),
        "copy_to_device refused: 200 bytes at offset 4000 do not fit the 4096-byte \
         allocation; no driver call was made"
    );
    let mut back = [0_u8; 8];
    let from = stream
        .copy_from_device(&allocation, 4095, &mut back)
        .unwrap_err();
    assert_eq!(
        from.to_string(),
        "copy_from_device refused: 8 bytes at offset 4095 do not fit the 4096-byte \
         allocation; no driver call was made"
    );
    let empty = stream
        .copy_from_device(&allocation, 12, &mut [])
        .unwrap_err();
    assert_eq!(
        empty.to_string(),
        "copy_from_device refused: 0 bytes at offset 12 of the 4096-byte allocation \
         (an empty copy); no driver call was made"
    );
    let zero = context.allocate(0).unwrap_err();
    assert_eq!(
        format!("{zero:?}"),
        "allocate refused: 0 bytes (an empty allocation); no driver call was made"
    );
    expect_log(&[]);
    let close = context.close().unwrap_err();
    assert_eq!(
        close.to_string(),
        "close refused: 2 streams or allocations of the context are alive (it is \
         destroyed when the last is released); no driver call was made"
    );
    drop((stream, allocation));
}

#[test]
fn a_fill_of_another_context_s_allocation_names_fill() {
    let api = fresh_api();
    let first = context(&api);
    let second = context(&api);
    let stream = first.create_stream().unwrap();
    let mut foreign = second.allocate(64).unwrap();
    take_log();
    let other = stream.fill(&mut foreign, 0).unwrap_err();
    assert_eq!(
        other.to_string(),
        "fill refused: the allocation belongs to another context than the stream; \
         no driver call was made"
    );
    expect_log(&[]);
}

#[test]
fn operation_names_are_the_documented_strings() {
    assert_eq!(operation::CTX_CREATE, "cuCtxCreate_v2");
    assert_eq!(
        operation::CTX_DESTROY_CHILDREN_LIVE,
        "cuCtxDestroy_v2:children-live"
    );
    assert_eq!(operation::MEM_ALLOC_ZERO_BYTES, "cuMemAlloc_v2:zero-bytes");
    assert_eq!(
        operation::CTX_POP_WRONG_CONTEXT,
        "cuCtxPopCurrent_v2:wrong-context"
    );
    // Every plain operation name is a listed export.
    for name in [
        operation::INIT,
        operation::DEVICE_GET,
        operation::CTX_CREATE,
        operation::CTX_DESTROY,
        operation::CTX_PUSH,
        operation::CTX_POP,
        operation::STREAM_CREATE,
        operation::STREAM_SYNCHRONIZE,
        operation::STREAM_DESTROY,
        operation::MEM_ALLOC,
        operation::MEM_FREE,
        operation::MEMCPY_TO_DEVICE,
        operation::MEMCPY_FROM_DEVICE,
        operation::MEMSET,
    ] {
        assert!(
            DRIVER_EXPORT_NAMES.iter().any(|e| e.to_str() == Ok(name)),
            "{name}"
        );
    }
}

#[test]
fn debug_output_names_the_handles() {
    let (_api, context) = fresh_context();
    let stream = context.create_stream().unwrap();
    let allocation = context.allocate(16).unwrap();
    assert!(format!("{context:?}").contains("live_children: 2"));
    assert!(format!("{stream:?}").starts_with("Stream"));
    assert!(format!("{allocation:?}").contains("0x400"));
}

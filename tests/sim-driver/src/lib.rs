//! A simulated CUDA driver for the end-to-end tests: a `cdylib` exporting
//! every symbol of `templates/driver-symbols.json` with its real signature.
//!
//! Tests place it at a reviewed path (`/usr/local/nvidia/lib64/libcuda.so.1`)
//! inside a private mount namespace, so the real loader, probe and smoke run
//! unchanged. Nothing here is ever shipped.
//!
//! Behaviour comes from [`CONFIG_PATH`], one `key=value` per line:
//!
//! - `driver_version=12040` (default 12040)
//! - `device=NAME|MAJOR|MINOR`, once per device in ordinal order; NAME may
//!   use `\xNN` (any byte, e.g. control characters) and `\\`
//! - `device_count=N` makes `cuDeviceGetCount` report N whatever the rows
//! - `fail=SYMBOL:RESULT` makes every call of SYMBOL return RESULT and do
//!   nothing else
//!
//! Blank lines and lines starting with `#` are ignored; a missing file means
//! all defaults (no devices). Every call appends one line to
//! [`CALL_LOG_PATH`]: the symbol, its key arguments and handles, the calling
//! thread's current context, and the result, e.g.
//! `cuMemAlloc_v2 bytes=4096 current=0x10000100 -> 0 ptr=0x700000010000`.
//!
//! Handles are distinct, non-null fake values; every thread has a real
//! context stack, so push/pop/create/destroy behave as the CUDA driver's do.
//! Destroying a context that still owns streams or allocations succeeds (as
//! CUDA does) but the log line records them as `leaked_*`.
//!
//! A missing export is simulated by the tests themselves: they copy this
//! library and rename one name in its ELF `.dynstr` (same length), so the
//! dynamic linker really cannot find it.

#![deny(unsafe_op_in_unsafe_fn)]

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, c_int, c_uint};
use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Where the tests write the behaviour of this driver.
pub const CONFIG_PATH: &str = "/usr/local/nvidia/sim/config";
/// Where every call is appended.
pub const CALL_LOG_PATH: &str = "/usr/local/nvidia/sim/calls.log";

type CUresult = c_int;
type CUdevice = c_int;
type CUdeviceptr = u64;
/// Opaque handles: the driver hands out addresses it never dereferences.
type CUcontext = *mut core::ffi::c_void;
type CUstream = *mut core::ffi::c_void;

const CUDA_SUCCESS: CUresult = 0;
const CUDA_ERROR_INVALID_VALUE: CUresult = 1;
const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
const CUDA_ERROR_INVALID_DEVICE: CUresult = 101;
const CUDA_ERROR_INVALID_CONTEXT: CUresult = 201;
const CUDA_ERROR_INVALID_HANDLE: CUresult = 400;

const DEFAULT_DRIVER_VERSION: c_int = 12040;
const CONTEXT_HANDLE_BASE: usize = 0x1000_0000;
const STREAM_HANDLE_BASE: usize = 0x2000_0000;
const DEVICE_POINTER_BASE: u64 = 0x7000_0000_0000;
const HANDLE_STRIDE: usize = 0x100;
const DEVICE_POINTER_STRIDE: u64 = 0x1_0000;

struct SimDevice {
    name: Vec<u8>,
    major: c_int,
    minor: c_int,
}

#[derive(Default)]
struct Config {
    driver_version: Option<c_int>,
    devices: Vec<SimDevice>,
    device_count: Option<c_int>,
    failures: BTreeMap<String, CUresult>,
}

impl Config {
    fn load() -> Self {
        std::fs::read_to_string(CONFIG_PATH)
            .map(|text| Self::parse(&text))
            .unwrap_or_default()
    }

    /// Unknown keys and malformed values are ignored: the tests own the file.
    fn parse(text: &str) -> Self {
        let mut config = Self::default();
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            match key.trim() {
                "driver_version" => config.driver_version = value.trim().parse().ok(),
                "device_count" => config.device_count = value.trim().parse().ok(),
                "device" => config.devices.extend(parse_device(value)),
                "fail" => {
                    if let Some((symbol, result)) = value.split_once(':') {
                        if let Ok(result) = result.trim().parse() {
                            config.failures.insert(symbol.trim().to_owned(), result);
                        }
                    }
                }
                _ => {}
            }
        }
        config
    }
}

fn parse_device(value: &str) -> Option<SimDevice> {
    let mut fields = value.rsplitn(3, '|');
    let minor = fields.next()?.trim().parse().ok()?;
    let major = fields.next()?.trim().parse().ok()?;
    let name = unescape(fields.next()?);
    Some(SimDevice { name, major, minor })
}

/// `\xNN` is the byte 0xNN and `\\` a backslash; everything else is literal.
fn unescape(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'\\' {
            if bytes.get(index + 1) == Some(&b'\\') {
                out.push(b'\\');
                index += 2;
                continue;
            }
            if bytes.get(index + 1) == Some(&b'x') {
                let hex = bytes
                    .get(index + 2..index + 4)
                    .and_then(|pair| std::str::from_utf8(pair).ok());
                if let Some(byte) = hex.and_then(|pair| u8::from_str_radix(pair, 16).ok()) {
                    out.push(byte);
                    index += 4;
                    continue;
                }
            }
        }
        out.push(bytes[index]);
        index += 1;
    }
    out
}

#[derive(Default)]
struct State {
    initialized: bool,
    next_serial: usize,
    contexts: BTreeSet<usize>,
    /// stream handle -> owning context
    streams: BTreeMap<usize, usize>,
    /// device pointer -> owning context
    allocations: BTreeMap<u64, usize>,
}

impl State {
    fn next_serial(&mut self) -> usize {
        self.next_serial += 1;
        self.next_serial
    }
}

fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(Config::load)
}

fn state() -> MutexGuard<'static, State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

thread_local! {
    static CONTEXT_STACK: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

fn current_context() -> Option<usize> {
    CONTEXT_STACK.with(|stack| stack.borrow().last().copied())
}

/// One call being recorded: its symbol and key arguments.
struct Call {
    line: String,
}

impl Call {
    fn new(symbol: &str) -> Self {
        Self {
            line: symbol.to_owned(),
        }
    }

    fn arg(mut self, name: &str, value: impl std::fmt::Display) -> Self {
        let _ = write!(self.line, " {name}={value}");
        self
    }

    fn current(self) -> Self {
        match current_context() {
            Some(context) => self.arg("current", format_args!("{context:#x}")),
            None => self.arg("current", "none"),
        }
    }

    /// Appends the line with its result (and any outputs) and returns the result.
    fn finish(self, result: CUresult, outputs: &str) -> CUresult {
        let mut line = self.line;
        let _ = write!(line, " -> {result}{outputs}");
        line.push('\n');
        if let Ok(mut log) = OpenOptions::new()
            .create(true)
            .append(true)
            .open(CALL_LOG_PATH)
        {
            let _ = log.write_all(line.as_bytes());
        }
        result
    }
}

fn injected_failure(symbol: &str) -> Option<CUresult> {
    config().failures.get(symbol).copied()
}

fn device_index(device: CUdevice) -> Option<usize> {
    usize::try_from(device)
        .ok()
        .filter(|index| *index < config().devices.len())
}

/// # Safety
/// Called by the loader like the real `cuInit`.
#[no_mangle]
pub unsafe extern "system" fn cuInit(flags: c_uint) -> CUresult {
    let call = Call::new("cuInit").arg("flags", flags);
    if let Some(result) = injected_failure("cuInit") {
        return call.finish(result, "");
    }
    if flags != 0 {
        return call.finish(CUDA_ERROR_INVALID_VALUE, "");
    }
    state().initialized = true;
    call.finish(CUDA_SUCCESS, "")
}

/// # Safety
/// `driver_version` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "system" fn cuDriverGetVersion(driver_version: *mut c_int) -> CUresult {
    let call = Call::new("cuDriverGetVersion");
    if let Some(result) = injected_failure("cuDriverGetVersion") {
        return call.finish(result, "");
    }
    if driver_version.is_null() {
        return call.finish(CUDA_ERROR_INVALID_VALUE, "");
    }
    let version = config().driver_version.unwrap_or(DEFAULT_DRIVER_VERSION);
    // SAFETY: non-null and valid for a write per this function's contract.
    unsafe { driver_version.write(version) };
    call.finish(CUDA_SUCCESS, &format!(" version={version}"))
}

/// # Safety
/// `count` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "system" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    let call = Call::new("cuDeviceGetCount");
    if let Some(result) = injected_failure("cuDeviceGetCount") {
        return call.finish(result, "");
    }
    if !state().initialized {
        return call.finish(CUDA_ERROR_NOT_INITIALIZED, "");
    }
    if count.is_null() {
        return call.finish(CUDA_ERROR_INVALID_VALUE, "");
    }
    let reported = config()
        .device_count
        .unwrap_or_else(|| c_int::try_from(config().devices.len()).unwrap_or(c_int::MAX));
    // SAFETY: non-null and valid for a write per this function's contract.
    unsafe { count.write(reported) };
    call.finish(CUDA_SUCCESS, &format!(" count={reported}"))
}

/// # Safety
/// `device` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "system" fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CUresult {
    let call = Call::new("cuDeviceGet").arg("ordinal", ordinal);
    if let Some(result) = injected_failure("cuDeviceGet") {
        return call.finish(result, "");
    }
    if !state().initialized {
        return call.finish(CUDA_ERROR_NOT_INITIALIZED, "");
    }
    if device.is_null() {
        return call.finish(CUDA_ERROR_INVALID_VALUE, "");
    }
    if device_index(ordinal).is_none() {
        return call.finish(CUDA_ERROR_INVALID_DEVICE, "");
    }
    // SAFETY: non-null and valid for a write per this function's contract.
    unsafe { device.write(ordinal) };
    call.finish(CUDA_SUCCESS, &format!(" device={ordinal}"))
}

/// # Safety
/// `name` must be null or valid for `len` bytes of writes.
#[no_mangle]
pub unsafe extern "system" fn cuDeviceGetName(
    name: *mut c_char,
    len: c_int,
    device: CUdevice,
) -> CUresult {
    let call = Call::new("cuDeviceGetName")
        .arg("len", len)
        .arg("device", device);
    if let Some(result) = injected_failure("cuDeviceGetName") {
        return call.finish(result, "");
    }
    if !state().initialized {
        return call.finish(CUDA_ERROR_NOT_INITIALIZED, "");
    }
    let Some(capacity) = usize::try_from(len).ok().filter(|len| *len > 0) else {
        return call.finish(CUDA_ERROR_INVALID_VALUE, "");
    };
    if name.is_null() {
        return call.finish(CUDA_ERROR_INVALID_VALUE, "");
    }
    let Some(index) = device_index(device) else {
        return call.finish(CUDA_ERROR_INVALID_DEVICE, "");
    };
    let source = &config().devices[index].name;
    let copied = source.len().min(capacity - 1);
    // SAFETY: `name` is valid for `capacity` bytes and we write `copied + 1`
    // <= `capacity` bytes; the source is a separate allocation.
    unsafe {
        core::ptr::copy_nonoverlapping(source.as_ptr(), name.cast::<u8>(), copied);
        name.cast::<u8>().add(copied).write(0);
    }
    call.finish(CUDA_SUCCESS, &format!(" bytes={copied}"))
}

/// # Safety
/// `major` and `minor` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "system" fn cuDeviceComputeCapability(
    major: *mut c_int,
    minor: *mut c_int,
    device: CUdevice,
) -> CUresult {
    let call = Call::new("cuDeviceComputeCapability").arg("device", device);
    if let Some(result) = injected_failure("cuDeviceComputeCapability") {
        return call.finish(result, "");
    }
    if !state().initialized {
        return call.finish(CUDA_ERROR_NOT_INITIALIZED, "");
    }
    if major.is_null() || minor.is_null() {
        return call.finish(CUDA_ERROR_INVALID_VALUE, "");
    }
    let Some(index) = device_index(device) else {
        return call.finish(CUDA_ERROR_INVALID_DEVICE, "");
    };
    let row = &config().devices[index];
    // SAFETY: both non-null and valid for a write per this function's contract.
    unsafe {
        major.write(row.major);
        minor.write(row.minor);
    }
    call.finish(
        CUDA_SUCCESS,
        &format!(" major={} minor={}", row.major, row.minor),
    )
}

/// # Safety
/// `context` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "system" fn cuCtxCreate_v2(
    context: *mut CUcontext,
    flags: c_uint,
    device: CUdevice,
) -> CUresult {
    let call = Call::new("cuCtxCreate_v2")
        .arg("flags", flags)
        .arg("device", device)
        .current();
    if let Some(result) = injected_failure("cuCtxCreate_v2") {
        return call.finish(result, "");
    }
    let mut state = state();
    if !state.initialized {
        return call.finish(CUDA_ERROR_NOT_INITIALIZED, "");
    }
    if context.is_null() {
        return call.finish(CUDA_ERROR_INVALID_VALUE, "");
    }
    if device_index(device).is_none() {
        return call.finish(CUDA_ERROR_INVALID_DEVICE, "");
    }
    let handle = CONTEXT_HANDLE_BASE + state.next_serial() * HANDLE_STRIDE;
    state.contexts.insert(handle);
    CONTEXT_STACK.with(|stack| stack.borrow_mut().push(handle));
    // SAFETY: non-null and valid for a write per this function's contract.
    unsafe { context.write(handle as CUcontext) };
    call.finish(CUDA_SUCCESS, &format!(" context={handle:#x}"))
}

/// # Safety
/// Called like the real `cuCtxDestroy_v2`; the handle is never dereferenced.
#[no_mangle]
pub unsafe extern "system" fn cuCtxDestroy_v2(context: CUcontext) -> CUresult {
    let handle = context as usize;
    let call = Call::new("cuCtxDestroy_v2")
        .arg("context", format_args!("{handle:#x}"))
        .current();
    if let Some(result) = injected_failure("cuCtxDestroy_v2") {
        return call.finish(result, "");
    }
    let mut state = state();
    if !state.contexts.remove(&handle) {
        return call.finish(CUDA_ERROR_INVALID_CONTEXT, "");
    }
    let leaked_streams = state
        .streams
        .values()
        .filter(|owner| **owner == handle)
        .count();
    let leaked_allocations = state
        .allocations
        .values()
        .filter(|owner| **owner == handle)
        .count();
    state.streams.retain(|_, owner| *owner != handle);
    state.allocations.retain(|_, owner| *owner != handle);
    // Like CUDA: a destroyed context leaves the calling thread's stack.
    CONTEXT_STACK.with(|stack| stack.borrow_mut().retain(|current| *current != handle));
    call.finish(
        CUDA_SUCCESS,
        &format!(" leaked_streams={leaked_streams} leaked_allocations={leaked_allocations}"),
    )
}

/// # Safety
/// Called like the real `cuCtxPushCurrent_v2`; the handle is never dereferenced.
#[no_mangle]
pub unsafe extern "system" fn cuCtxPushCurrent_v2(context: CUcontext) -> CUresult {
    let handle = context as usize;
    let call = Call::new("cuCtxPushCurrent_v2")
        .arg("context", format_args!("{handle:#x}"))
        .current();
    if let Some(result) = injected_failure("cuCtxPushCurrent_v2") {
        return call.finish(result, "");
    }
    if !state().contexts.contains(&handle) {
        return call.finish(CUDA_ERROR_INVALID_CONTEXT, "");
    }
    CONTEXT_STACK.with(|stack| stack.borrow_mut().push(handle));
    call.finish(CUDA_SUCCESS, "")
}

/// # Safety
/// `context` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "system" fn cuCtxPopCurrent_v2(context: *mut CUcontext) -> CUresult {
    let call = Call::new("cuCtxPopCurrent_v2").current();
    if let Some(result) = injected_failure("cuCtxPopCurrent_v2") {
        return call.finish(result, "");
    }
    let Some(handle) = CONTEXT_STACK.with(|stack| stack.borrow_mut().pop()) else {
        return call.finish(CUDA_ERROR_INVALID_CONTEXT, "");
    };
    if !context.is_null() {
        // SAFETY: non-null and valid for a write per this function's contract.
        unsafe { context.write(handle as CUcontext) };
    }
    call.finish(CUDA_SUCCESS, &format!(" popped={handle:#x}"))
}

/// # Safety
/// `stream` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "system" fn cuStreamCreate(stream: *mut CUstream, flags: c_uint) -> CUresult {
    let call = Call::new("cuStreamCreate").arg("flags", flags).current();
    if let Some(result) = injected_failure("cuStreamCreate") {
        return call.finish(result, "");
    }
    let Some(owner) = current_context() else {
        return call.finish(CUDA_ERROR_INVALID_CONTEXT, "");
    };
    if stream.is_null() {
        return call.finish(CUDA_ERROR_INVALID_VALUE, "");
    }
    let mut state = state();
    let handle = STREAM_HANDLE_BASE + state.next_serial() * HANDLE_STRIDE;
    state.streams.insert(handle, owner);
    // SAFETY: non-null and valid for a write per this function's contract.
    unsafe { stream.write(handle as CUstream) };
    call.finish(CUDA_SUCCESS, &format!(" stream={handle:#x}"))
}

/// # Safety
/// Called like the real `cuStreamDestroy_v2`; the handle is never dereferenced.
#[no_mangle]
pub unsafe extern "system" fn cuStreamDestroy_v2(stream: CUstream) -> CUresult {
    let handle = stream as usize;
    let call = Call::new("cuStreamDestroy_v2")
        .arg("stream", format_args!("{handle:#x}"))
        .current();
    if let Some(result) = injected_failure("cuStreamDestroy_v2") {
        return call.finish(result, "");
    }
    if state().streams.remove(&handle).is_none() {
        return call.finish(CUDA_ERROR_INVALID_HANDLE, "");
    }
    call.finish(CUDA_SUCCESS, "")
}

/// # Safety
/// Called like the real `cuStreamSynchronize`; the handle is never dereferenced.
#[no_mangle]
pub unsafe extern "system" fn cuStreamSynchronize(stream: CUstream) -> CUresult {
    let handle = stream as usize;
    let call = Call::new("cuStreamSynchronize")
        .arg("stream", format_args!("{handle:#x}"))
        .current();
    if let Some(result) = injected_failure("cuStreamSynchronize") {
        return call.finish(result, "");
    }
    if !state().streams.contains_key(&handle) {
        return call.finish(CUDA_ERROR_INVALID_HANDLE, "");
    }
    call.finish(CUDA_SUCCESS, "")
}

/// # Safety
/// `device_pointer` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "system" fn cuMemAlloc_v2(
    device_pointer: *mut CUdeviceptr,
    byte_size: usize,
) -> CUresult {
    let call = Call::new("cuMemAlloc_v2").arg("bytes", byte_size).current();
    if let Some(result) = injected_failure("cuMemAlloc_v2") {
        return call.finish(result, "");
    }
    let Some(owner) = current_context() else {
        return call.finish(CUDA_ERROR_INVALID_CONTEXT, "");
    };
    if device_pointer.is_null() || byte_size == 0 {
        return call.finish(CUDA_ERROR_INVALID_VALUE, "");
    }
    let mut state = state();
    let serial = u64::try_from(state.next_serial()).unwrap_or(u64::MAX / DEVICE_POINTER_STRIDE);
    let pointer = DEVICE_POINTER_BASE + serial * DEVICE_POINTER_STRIDE;
    state.allocations.insert(pointer, owner);
    // SAFETY: non-null and valid for a write per this function's contract.
    unsafe { device_pointer.write(pointer) };
    call.finish(CUDA_SUCCESS, &format!(" pointer={pointer:#x}"))
}

/// # Safety
/// Called like the real `cuMemFree_v2`; the pointer is never dereferenced.
#[no_mangle]
pub unsafe extern "system" fn cuMemFree_v2(device_pointer: CUdeviceptr) -> CUresult {
    let call = Call::new("cuMemFree_v2")
        .arg("pointer", format_args!("{device_pointer:#x}"))
        .current();
    if let Some(result) = injected_failure("cuMemFree_v2") {
        return call.finish(result, "");
    }
    if current_context().is_none() {
        return call.finish(CUDA_ERROR_INVALID_CONTEXT, "");
    }
    if state().allocations.remove(&device_pointer).is_none() {
        return call.finish(CUDA_ERROR_INVALID_VALUE, "");
    }
    call.finish(CUDA_SUCCESS, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_devices_escapes_and_failures() {
        let config = Config::parse(
            "# comment\ndriver_version=12080\ndevice=Sim \\x01A|B\\\\|8|6\ndevice=bad|x|1\nfail=cuInit:100\ndevice_count=3\n",
        );
        assert_eq!(config.driver_version, Some(12080));
        assert_eq!(config.devices.len(), 1);
        assert_eq!(config.devices[0].name, b"Sim \x01A|B\\");
        assert_eq!((config.devices[0].major, config.devices[0].minor), (8, 6));
        assert_eq!(config.failures.get("cuInit"), Some(&100));
        assert_eq!(config.device_count, Some(3));
    }

    #[test]
    fn unescape_keeps_malformed_escapes_literal() {
        assert_eq!(unescape("a\\xZZ\\x4"), b"a\\xZZ\\x4");
        assert_eq!(unescape("\\x2f\\x00"), b"/\0");
    }
}

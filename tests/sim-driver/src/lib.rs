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
//! - `daemon=load` / `daemon=init` leave a `setsid` daemon behind from the
//!   library's constructor / from `cuInit` (see `daemon.rs`)
//! - `print_at_load=TEXT` makes the library's constructor print TEXT and a
//!   newline to stdout when it is loaded (a driver that talks)
//! - `fork_storm=1` makes the library's constructor start a thread that keeps
//!   forking `setsid` children for as long as the process lives (see
//!   `storm.rs`)
//! - `corrupt_read=N` makes every `cuMemcpyDtoHAsync_v2` deliver byte N of
//!   its copy inverted (a driver that loses a byte); device memory keeps
//!   the right one
//! - `hang_at_load=1` makes the library's constructor (after any
//!   `daemon=load`) append `hang pid=PID` to [`HANG_LOG_PATH`] and then sleep
//!   forever: a driver that hangs while loading (Linux only)
//!
//! Blank lines and lines starting with `#` are ignored; a missing file means
//! all defaults (no devices). As NVIDIA's driver does, `cuDriverGetVersion`
//! answers before `cuInit`, and `cuInit` returns 100 (`CUDA_ERROR_NO_DEVICE`)
//! when no device is configured (neither a `device` row nor `device_count`).
//! Every call appends one line to
//! [`CALL_LOG_PATH`]: the symbol, its key arguments and handles, the calling
//! thread's current context, and the result, e.g.
//! `cuMemAlloc_v2 bytes=4096 current=0x10000100 -> 0 pointer=0x700000010000`.
//! `cuInit` also logs the driver environment it sees
//! (`CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_DISABLE_JIT=1 CUDA_FORCE_PRELOAD_LIBRARIES=0`,
//! `unset` if absent).
//!
//! Handles are distinct, non-null fake values; every thread has a real
//! context stack, so push/pop/create/destroy behave as the CUDA driver's do:
//! destroying the current context pops it, destroying one that is not
//! current leaves the stack alone, and a destroyed context answers 709
//! (`CUDA_ERROR_CONTEXT_IS_DESTROYED`).
//! Destroying a context that still owns streams or allocations succeeds (as
//! CUDA does) but the log line records them as `leaked_*`.
//!
//! Device memory is real: each allocation holds its bytes (0xEE until
//! written). `cuMemcpyHtoDAsync_v2`, `cuMemcpyDtoHAsync_v2` and
//! `cuMemsetD8Async` move them when called, as NVIDIA's driver does for
//! pageable host memory, on a live stream of the current context and only
//! within one of its allocations. The copies log the FNV-1a 64 digest of
//! the bytes they moved (`fnv1a64=...`, for DtoH what the host received),
//! and `cuMemFree_v2` that of the allocation's final bytes, so a test can
//! check the bytes from the log alone.
//!
//! Every listed symbol this file does not define by hand (a method of
//! `impl Exports for Sim`) is exported by `sim_exports!`, fed the list by the
//! runtime's `with_driver_symbols!`, with its listed signature: it logs its
//! name and returns `fail=SYMBOL:RESULT` when configured, otherwise
//! `CUDA_ERROR_NOT_SUPPORTED` (801), so adding a symbol to the list never
//! needs an edit here.
//!
//! A missing export is simulated by the tests themselves: they copy this
//! library and rename one name in its ELF `.dynstr` (same length), so the
//! dynamic linker really cannot find it.
//!
//! Built for Windows (`nvcuda.dll`, run under Wine), each copy reads its
//! config from `rextio-sim.config` beside the DLL itself and appends its
//! calls to `rextio-sim.calls.log` there, the first line naming the file
//! that was loaded (`loaded C:\windows\system32\nvcuda.dll`): so a test
//! can give System32's copy and each decoy their own answers and see which
//! one the probe loaded.

#![deny(unsafe_op_in_unsafe_fn)]

/// A driver that leaves daemons behind (`daemon=STAGE`; POSIX only).
#[cfg(unix)]
mod daemon;

/// A driver thread that keeps forking (`fork_storm=1`; Linux only).
#[cfg(target_os = "linux")]
mod storm;

/// `daemon=STAGE`: a `setsid` daemon left behind at `stage` (Windows: none).
fn leave_daemon(stage: &str) {
    if config().daemons.contains(stage) {
        #[cfg(unix)]
        daemon::spawn(stage);
    }
}

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
#[allow(unused_imports)]
use std::ffi::{c_char, c_int, c_longlong, c_uchar, c_uint, c_ulonglong, c_void};

#[allow(unused_imports)]
use rextio_cuda_runtime::*;
use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Where the tests write the behaviour of this driver.
pub const CONFIG_PATH: &str = "/usr/local/nvidia/sim/config";
/// Where every call is appended.
pub const CALL_LOG_PATH: &str = "/usr/local/nvidia/sim/calls.log";

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
    print_at_load: Option<String>,
    daemons: BTreeSet<String>,
    fork_storm: bool,
    corrupt_read: Option<usize>,
    hang_at_load: bool,
}

impl Config {
    fn load() -> Self {
        std::fs::read_to_string(location::config())
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
                "print_at_load" => config.print_at_load = Some(value.to_owned()),
                "daemon" => {
                    config.daemons.insert(value.trim().to_owned());
                }
                "fork_storm" => config.fork_storm = value.trim() == "1",
                "corrupt_read" => config.corrupt_read = value.trim().parse().ok(),
                "hang_at_load" => config.hang_at_load = value.trim() == "1",
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

/// Runs when the dynamic linker loads this library, as a C constructor does.
extern "C" fn at_load() {
    leave_daemon("load");
    if config().hang_at_load {
        #[cfg(target_os = "linux")]
        hang_forever();
    }
    if config().fork_storm {
        #[cfg(target_os = "linux")]
        storm::start();
    }
    if let Some(text) = &config().print_at_load {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{text}");
        let _ = stdout.flush();
    }
}

/// Where `hang_at_load=1` logs the pid of the process that hangs.
pub const HANG_LOG_PATH: &str = "/usr/local/nvidia/sim/hang.log";

/// `hang_at_load=1`: logs this process's pid, then sleeps forever (only a
/// signal ends it).
#[cfg(target_os = "linux")]
fn hang_forever() -> ! {
    if let Ok(mut log) = OpenOptions::new()
        .create(true)
        .append(true)
        .open(HANG_LOG_PATH)
    {
        // One write: a reader never sees half a line.
        let _ = log.write_all(format!("hang pid={}\n", std::process::id()).as_bytes());
    }
    loop {
        // SAFETY: pause takes nothing and only waits for a signal.
        unsafe { libc::pause() };
    }
}

#[cfg(unix)]
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

/// Where this copy reads its config and appends its calls.
#[cfg(unix)]
mod location {
    use std::path::PathBuf;

    pub fn config() -> PathBuf {
        super::CONFIG_PATH.into()
    }

    pub fn call_log() -> PathBuf {
        super::CALL_LOG_PATH.into()
    }
}

/// Where this copy reads its config and appends its calls: beside the DLL
/// itself, so System32's copy and a decoy each answer for themselves.
#[cfg(windows)]
mod location {
    use std::ffi::c_void;
    use std::io::Write as _;
    use std::os::windows::ffi::OsStringExt as _;
    use std::path::PathBuf;
    use std::sync::OnceLock;

    const CONFIG_NAME: &str = "rextio-sim.config";
    const CALL_LOG_NAME: &str = "rextio-sim.calls.log";
    const DLL_PROCESS_ATTACH: u32 = 1;
    /// Longer than any path the tests use; a longer one records nothing.
    const MAX_MODULE_PATH: usize = 4096;

    // kernel32 is linked into every Windows program by the toolchain.
    extern "system" {
        fn GetModuleFileNameW(module: *mut c_void, name: *mut u16, size: u32) -> u32;
    }

    /// This DLL's own file, set when it is attached.
    static MODULE_PATH: OnceLock<PathBuf> = OnceLock::new();

    fn beside_module(name: &str) -> PathBuf {
        MODULE_PATH
            .get()
            .and_then(|path| path.parent())
            .map(|directory| directory.join(name))
            .unwrap_or_else(|| PathBuf::from(name))
    }

    pub fn config() -> PathBuf {
        beside_module(CONFIG_NAME)
    }

    pub fn call_log() -> PathBuf {
        beside_module(CALL_LOG_NAME)
    }

    /// # Safety
    /// Called by the Windows loader with this module's handle.
    #[no_mangle]
    pub unsafe extern "system" fn DllMain(
        module: *mut c_void,
        reason: u32,
        _reserved: *mut c_void,
    ) -> i32 {
        if reason == DLL_PROCESS_ATTACH {
            let mut buffer = vec![0u16; MAX_MODULE_PATH];
            let capacity = u32::try_from(buffer.len()).unwrap_or(u32::MAX);
            // SAFETY: `buffer` is valid for `capacity` UTF-16 units of writes.
            let written = unsafe { GetModuleFileNameW(module, buffer.as_mut_ptr(), capacity) };
            let written = usize::try_from(written).unwrap_or(0);
            if written > 0 && written < buffer.len() {
                let path = PathBuf::from(std::ffi::OsString::from_wide(&buffer[..written]));
                let _ = MODULE_PATH.set(path.clone());
                // The record that this copy, and which file, was loaded.
                if let Ok(mut log) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(call_log())
                {
                    let _ = writeln!(log, "loaded {}", path.display());
                }
            }
            super::at_load();
        }
        1
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
    /// Contexts that existed and were destroyed: they answer 709.
    destroyed: BTreeSet<usize>,
    /// stream handle -> owning context
    streams: BTreeMap<usize, usize>,
    /// device pointer -> owning context
    allocations: BTreeMap<u64, usize>,
    /// device pointer -> the allocation's bytes
    memory: BTreeMap<u64, Vec<u8>>,
}

impl State {
    fn next_serial(&mut self) -> usize {
        self.next_serial += 1;
        self.next_serial
    }

    /// The bytes of `length` at device `address`, when they lie in one
    /// allocation owned by `context`.
    fn device_bytes(
        &mut self,
        address: CUdeviceptr,
        length: usize,
        context: usize,
    ) -> Result<&mut [u8], CUresult> {
        let (&base, bytes) = self
            .memory
            .range_mut(..=address)
            .next_back()
            .ok_or(CUDA_ERROR_INVALID_VALUE)?;
        let start = usize::try_from(address - base).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        let end = start.checked_add(length).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        if self.allocations.get(&base) != Some(&context) || end > bytes.len() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        Ok(&mut bytes[start..end])
    }

    /// `stream` is live and belongs to `context`: 400 for an unknown
    /// stream, 201 for another context's.
    fn require_stream_of(&self, stream: usize, context: usize) -> Result<(), CUresult> {
        match self.streams.get(&stream) {
            Some(owner) if *owner == context => Ok(()),
            Some(_) => Err(CUDA_ERROR_INVALID_CONTEXT),
            None => Err(CUDA_ERROR_INVALID_HANDLE),
        }
    }
}

/// What device memory holds before anything writes it.
const FRESH_DEVICE_BYTE: u8 = 0xEE;

/// The FNV-1a 64 digest of `bytes`, as the log writes it.
fn fnv1a64(bytes: &[u8]) -> String {
    let digest = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!(" fnv1a64={digest:016x}")
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
    symbol: &'static str,
    line: String,
}

impl Call {
    fn new(symbol: &'static str) -> Self {
        Self {
            symbol,
            line: symbol.to_owned(),
        }
    }

    fn arg(mut self, name: &str, value: impl std::fmt::Display) -> Self {
        let _ = write!(self.line, " {name}={value}");
        self
    }

    /// A handle or device pointer argument, in hex.
    fn handle(self, name: &str, handle: impl std::fmt::LowerHex) -> Self {
        self.arg(name, format_args!("{handle:#x}"))
    }

    fn current(self) -> Self {
        match current_context() {
            Some(context) => self.handle("current", context),
            None => self.arg("current", "none"),
        }
    }

    /// Returns the failure the config injects for this symbol (doing nothing
    /// else), or runs `body`: `Ok(outputs)` is success with the outputs for
    /// the log, `Err(result)` a failure. Logs the call either way.
    fn run(self, body: impl FnOnce() -> Result<String, CUresult>) -> CUresult {
        let outcome = match injected_failure(self.symbol) {
            Some(result) => Err(result),
            None => body(),
        };
        match outcome {
            Ok(outputs) => self.finish(CUDA_SUCCESS, &outputs),
            Err(result) => self.finish(result, ""),
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
            .open(location::call_log())
        {
            let _ = log.write_all(line.as_bytes());
        }
        result
    }
}

/// What every generated default export does: logs the call; returns the
/// configured result, or 801 (`CUDA_ERROR_NOT_SUPPORTED`) when none is.
fn default_call(symbol: &'static str) -> CUresult {
    Call::new(symbol).run(|| Err(CUDA_ERROR_NOT_SUPPORTED))
}

fn injected_failure(symbol: &str) -> Option<CUresult> {
    config().failures.get(symbol).copied()
}

fn device_index(device: CUdevice) -> Option<usize> {
    usize::try_from(device)
        .ok()
        .filter(|index| *index < config().devices.len())
}

fn require_initialized() -> Result<(), CUresult> {
    if state().initialized {
        Ok(())
    } else {
        Err(CUDA_ERROR_NOT_INITIALIZED)
    }
}

fn require_non_null<T>(pointer: *mut T) -> Result<(), CUresult> {
    if pointer.is_null() {
        Err(CUDA_ERROR_INVALID_VALUE)
    } else {
        Ok(())
    }
}

fn require_device(device: CUdevice) -> Result<usize, CUresult> {
    device_index(device).ok_or(CUDA_ERROR_INVALID_DEVICE)
}

/// A live context, 709 for one that was destroyed, 201 for anything else.
fn require_live_context(state: &State, handle: usize) -> Result<(), CUresult> {
    if state.contexts.contains(&handle) {
        Ok(())
    } else if state.destroyed.contains(&handle) {
        Err(CUDA_ERROR_CONTEXT_IS_DESTROYED)
    } else {
        Err(CUDA_ERROR_INVALID_CONTEXT)
    }
}

/// The calling thread's current context; 709 when it was destroyed while
/// below the top of the stack.
fn require_current_context() -> Result<usize, CUresult> {
    let current = current_context().ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
    require_live_context(&state(), current)?;
    Ok(current)
}

/// The value of an environment variable the probe and smoke must set before
/// `cuInit`, as the log shows it (`unset` when absent).
fn environment_value(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| "unset".to_owned())
}

/// The simulated exports, one per listed symbol: `#[no_mangle]` functions
/// with the listed signatures, each calling `Sim`'s method of its name. The
/// trait's default method logs the call and returns the configured result
/// (`default_call`), so a symbol added to the list needs no edit here; the
/// methods `Sim` defines are the hand-written behaviour, and the compiler
/// checks their signatures against the list.
macro_rules! sim_exports {
    ($($tier:ident $since:literal $export:ident($($param:ident: $type:ty),*);)*) => {
        /// Every listed export's behaviour.
        #[allow(non_snake_case, unused_variables, clippy::missing_safety_doc)]
        trait Exports {
            $(
                /// # Safety
                /// Called like the driver's export of this name.
                unsafe fn $export($($param: $type),*) -> CUresult {
                    default_call(stringify!($export))
                }
            )*
        }

        $(
            /// # Safety
            /// Called by the loader like the driver's export of this name.
            #[no_mangle]
            pub unsafe extern "system" fn $export($($param: $type),*) -> CUresult {
                unsafe { <Sim as Exports>::$export($($param),*) }
            }
        )*
    };
}

rextio_cuda_runtime::with_driver_symbols!(sim_exports! {});

/// The hand-written exports.
struct Sim;

#[allow(non_snake_case)]
impl Exports for Sim {
    /// # Safety
    /// Called by the loader like the real `cuInit`.
    unsafe fn cuInit(flags: c_uint) -> CUresult {
        // The driver environment as cuInit sees it.
        let mut call = Call::new("cuInit").arg("flags", flags);
        for name in [
            "CUDA_DEVICE_ORDER",
            "CUDA_DISABLE_JIT",
            "CUDA_FORCE_PRELOAD_LIBRARIES",
        ] {
            call = call.arg(name, environment_value(name));
        }
        leave_daemon("init");
        if config().fork_storm {
            #[cfg(target_os = "linux")]
            storm::wait_for_forks();
        }
        call.run(|| {
            if flags != 0 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            // Like NVIDIA's driver: with no visible device cuInit fails with
            // CUDA_ERROR_NO_DEVICE and the driver stays uninitialized.
            if config().devices.is_empty() && config().device_count.is_none() {
                return Err(CUDA_ERROR_NO_DEVICE);
            }
            state().initialized = true;
            Ok(String::new())
        })
    }

    /// # Safety
    /// `driver_version` must be null or valid for a write.
    unsafe fn cuDriverGetVersion(driver_version: *mut c_int) -> CUresult {
        Call::new("cuDriverGetVersion").run(|| {
            require_non_null(driver_version)?;
            let version = config().driver_version.unwrap_or(DEFAULT_DRIVER_VERSION);
            // SAFETY: non-null and valid for a write per this function's contract.
            unsafe { driver_version.write(version) };
            Ok(format!(" version={version}"))
        })
    }

    /// # Safety
    /// `count` must be null or valid for a write.
    unsafe fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
        Call::new("cuDeviceGetCount").run(|| {
            require_initialized()?;
            require_non_null(count)?;
            let reported = config()
                .device_count
                .unwrap_or_else(|| c_int::try_from(config().devices.len()).unwrap_or(c_int::MAX));
            // SAFETY: non-null and valid for a write per this function's contract.
            unsafe { count.write(reported) };
            Ok(format!(" count={reported}"))
        })
    }

    /// # Safety
    /// `device` must be null or valid for a write.
    unsafe fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CUresult {
        Call::new("cuDeviceGet").arg("ordinal", ordinal).run(|| {
            require_initialized()?;
            require_non_null(device)?;
            require_device(ordinal)?;
            // SAFETY: non-null and valid for a write per this function's contract.
            unsafe { device.write(ordinal) };
            Ok(format!(" device={ordinal}"))
        })
    }

    /// # Safety
    /// `name` must be null or valid for `len` bytes of writes.
    unsafe fn cuDeviceGetName(name: *mut c_char, len: c_int, device: CUdevice) -> CUresult {
        let call = Call::new("cuDeviceGetName")
            .arg("len", len)
            .arg("device", device);
        call.run(|| {
            require_initialized()?;
            let capacity = usize::try_from(len)
                .ok()
                .filter(|len| *len > 0)
                .ok_or(CUDA_ERROR_INVALID_VALUE)?;
            require_non_null(name)?;
            let source = &config().devices[require_device(device)?].name;
            let copied = source.len().min(capacity - 1);
            // SAFETY: `name` is valid for `capacity` bytes and we write
            // `copied + 1` <= `capacity` bytes; the source is a separate
            // allocation.
            unsafe {
                core::ptr::copy_nonoverlapping(source.as_ptr(), name.cast::<u8>(), copied);
                name.cast::<u8>().add(copied).write(0);
            }
            Ok(format!(" bytes={copied}"))
        })
    }

    /// # Safety
    /// `major` and `minor` must be null or valid for a write.
    unsafe fn cuDeviceComputeCapability(
        major: *mut c_int,
        minor: *mut c_int,
        device: CUdevice,
    ) -> CUresult {
        Call::new("cuDeviceComputeCapability")
            .arg("device", device)
            .run(|| {
                require_initialized()?;
                require_non_null(major)?;
                require_non_null(minor)?;
                let row = &config().devices[require_device(device)?];
                // SAFETY: both non-null and valid for a write per this
                // function's contract.
                unsafe {
                    major.write(row.major);
                    minor.write(row.minor);
                }
                Ok(format!(" major={} minor={}", row.major, row.minor))
            })
    }

    /// # Safety
    /// `context` must be null or valid for a write.
    unsafe fn cuCtxCreate_v2(context: *mut CUcontext, flags: c_uint, device: CUdevice) -> CUresult {
        let call = Call::new("cuCtxCreate_v2")
            .arg("flags", flags)
            .arg("device", device)
            .current();
        call.run(|| {
            require_initialized()?;
            require_non_null(context)?;
            require_device(device)?;
            let mut state = state();
            let handle = CONTEXT_HANDLE_BASE + state.next_serial() * HANDLE_STRIDE;
            state.contexts.insert(handle);
            CONTEXT_STACK.with(|stack| stack.borrow_mut().push(handle));
            // SAFETY: non-null and valid for a write per this function's contract.
            unsafe { context.write(handle as CUcontext) };
            Ok(format!(" context={handle:#x}"))
        })
    }

    /// # Safety
    /// Called like the real `cuCtxDestroy_v2`; the handle is never dereferenced.
    unsafe fn cuCtxDestroy_v2(context: CUcontext) -> CUresult {
        let handle = context as usize;
        let call = Call::new("cuCtxDestroy_v2")
            .handle("context", handle)
            .current();
        call.run(|| {
            let mut state = state();
            require_live_context(&state, handle)?;
            state.contexts.remove(&handle);
            state.destroyed.insert(handle);
            let owned_by = |owner: &usize| *owner == handle;
            let leaked_streams = state.streams.values().filter(|o| owned_by(o)).count();
            let leaked_allocations = state.allocations.values().filter(|o| owned_by(o)).count();
            state.streams.retain(|_, owner| !owned_by(owner));
            state.allocations.retain(|_, owner| !owned_by(owner));
            // Like CUDA: destroying the calling thread's current context pops
            // it; a context that is not current leaves the stack alone.
            CONTEXT_STACK.with(|stack| {
                let mut stack = stack.borrow_mut();
                if stack.last() == Some(&handle) {
                    stack.pop();
                }
            });
            Ok(format!(
                " leaked_streams={leaked_streams} leaked_allocations={leaked_allocations}"
            ))
        })
    }

    /// # Safety
    /// Called like the real `cuCtxPushCurrent_v2`; the handle is never dereferenced.
    unsafe fn cuCtxPushCurrent_v2(context: CUcontext) -> CUresult {
        let handle = context as usize;
        let call = Call::new("cuCtxPushCurrent_v2")
            .handle("context", handle)
            .current();
        call.run(|| {
            require_live_context(&state(), handle)?;
            CONTEXT_STACK.with(|stack| stack.borrow_mut().push(handle));
            Ok(String::new())
        })
    }

    /// # Safety
    /// `context` must be null or valid for a write.
    unsafe fn cuCtxPopCurrent_v2(context: *mut CUcontext) -> CUresult {
        Call::new("cuCtxPopCurrent_v2").current().run(|| {
            let handle = CONTEXT_STACK
                .with(|stack| stack.borrow_mut().pop())
                .ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
            if !context.is_null() {
                // SAFETY: non-null and valid for a write per this function's contract.
                unsafe { context.write(handle as CUcontext) };
            }
            Ok(format!(" popped={handle:#x}"))
        })
    }

    /// # Safety
    /// `stream` must be null or valid for a write.
    unsafe fn cuStreamCreate(stream: *mut CUstream, flags: c_uint) -> CUresult {
        Call::new("cuStreamCreate")
            .arg("flags", flags)
            .current()
            .run(|| {
                let owner = require_current_context()?;
                require_non_null(stream)?;
                let mut state = state();
                let handle = STREAM_HANDLE_BASE + state.next_serial() * HANDLE_STRIDE;
                state.streams.insert(handle, owner);
                // SAFETY: non-null and valid for a write per this function's contract.
                unsafe { stream.write(handle as CUstream) };
                Ok(format!(" stream={handle:#x}"))
            })
    }

    /// # Safety
    /// Called like the real `cuStreamDestroy_v2`; the handle is never dereferenced.
    unsafe fn cuStreamDestroy_v2(stream: CUstream) -> CUresult {
        let handle = stream as usize;
        let call = Call::new("cuStreamDestroy_v2")
            .handle("stream", handle)
            .current();
        call.run(|| match state().streams.remove(&handle) {
            Some(_) => Ok(String::new()),
            None => Err(CUDA_ERROR_INVALID_HANDLE),
        })
    }

    /// # Safety
    /// Called like the real `cuStreamSynchronize`; the handle is never dereferenced.
    unsafe fn cuStreamSynchronize(stream: CUstream) -> CUresult {
        let handle = stream as usize;
        let call = Call::new("cuStreamSynchronize")
            .handle("stream", handle)
            .current();
        call.run(|| match state().streams.contains_key(&handle) {
            true => Ok(String::new()),
            false => Err(CUDA_ERROR_INVALID_HANDLE),
        })
    }

    /// # Safety
    /// `device_pointer` must be null or valid for a write.
    unsafe fn cuMemAlloc_v2(device_pointer: *mut CUdeviceptr, byte_size: usize) -> CUresult {
        let call = Call::new("cuMemAlloc_v2").arg("bytes", byte_size).current();
        call.run(|| {
            let owner = require_current_context()?;
            require_non_null(device_pointer)?;
            if byte_size == 0 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let mut state = state();
            let serial =
                u64::try_from(state.next_serial()).unwrap_or(u64::MAX / DEVICE_POINTER_STRIDE);
            let pointer = DEVICE_POINTER_BASE + serial * DEVICE_POINTER_STRIDE;
            // Later handles start past this allocation's bytes.
            let strides = byte_size.div_ceil(DEVICE_POINTER_STRIDE as usize);
            state.next_serial += strides.saturating_sub(1);
            state.allocations.insert(pointer, owner);
            state
                .memory
                .insert(pointer, vec![FRESH_DEVICE_BYTE; byte_size]);
            // SAFETY: non-null and valid for a write per this function's contract.
            unsafe { device_pointer.write(pointer) };
            Ok(format!(" pointer={pointer:#x}"))
        })
    }

    /// # Safety
    /// Called like the real `cuMemFree_v2`; the pointer is never dereferenced.
    unsafe fn cuMemFree_v2(device_pointer: CUdeviceptr) -> CUresult {
        let call = Call::new("cuMemFree_v2")
            .handle("pointer", device_pointer)
            .current();
        call.run(|| {
            require_current_context()?;
            let mut state = state();
            match state.allocations.remove(&device_pointer) {
                Some(_) => {
                    let bytes = state.memory.remove(&device_pointer).unwrap_or_default();
                    Ok(fnv1a64(&bytes))
                }
                None => Err(CUDA_ERROR_INVALID_VALUE),
            }
        })
    }

    /// # Safety
    /// `source` must be null or valid for `byte_count` reads.
    unsafe fn cuMemcpyHtoDAsync_v2(
        destination: CUdeviceptr,
        source: *const c_void,
        byte_count: usize,
        stream: CUstream,
    ) -> CUresult {
        let call = Call::new("cuMemcpyHtoDAsync_v2")
            .handle("pointer", destination)
            .arg("bytes", byte_count)
            .handle("stream", stream as usize)
            .current();
        call.run(|| {
            let owner = require_current_context()?;
            require_non_null(source.cast_mut())?;
            let mut state = state();
            state.require_stream_of(stream as usize, owner)?;
            let device = state.device_bytes(destination, byte_count, owner)?;
            // SAFETY: non-null and valid for `byte_count` reads per this
            // function's contract; device memory is this library's own.
            let source = unsafe { core::slice::from_raw_parts(source.cast::<u8>(), byte_count) };
            device.copy_from_slice(source);
            Ok(fnv1a64(source))
        })
    }

    /// # Safety
    /// `destination` must be null or valid for `byte_count` writes.
    unsafe fn cuMemcpyDtoHAsync_v2(
        destination: *mut c_void,
        source: CUdeviceptr,
        byte_count: usize,
        stream: CUstream,
    ) -> CUresult {
        let call = Call::new("cuMemcpyDtoHAsync_v2")
            .handle("pointer", source)
            .arg("bytes", byte_count)
            .handle("stream", stream as usize)
            .current();
        call.run(|| {
            let owner = require_current_context()?;
            require_non_null(destination)?;
            let mut state = state();
            state.require_stream_of(stream as usize, owner)?;
            let device = state.device_bytes(source, byte_count, owner)?;
            // SAFETY: non-null and valid for `byte_count` writes per this
            // function's contract; device memory is this library's own.
            let host =
                unsafe { core::slice::from_raw_parts_mut(destination.cast::<u8>(), byte_count) };
            host.copy_from_slice(device);
            if let Some(byte) = config().corrupt_read.and_then(|index| host.get_mut(index)) {
                *byte = !*byte;
            }
            Ok(fnv1a64(host))
        })
    }

    /// # Safety
    /// Called like the real `cuMemsetD8Async`; no host memory is touched.
    unsafe fn cuMemsetD8Async(
        destination: CUdeviceptr,
        value: c_uchar,
        count: usize,
        stream: CUstream,
    ) -> CUresult {
        let call = Call::new("cuMemsetD8Async")
            .handle("pointer", destination)
            .arg("value", value)
            .arg("bytes", count)
            .handle("stream", stream as usize)
            .current();
        call.run(|| {
            let owner = require_current_context()?;
            let mut state = state();
            state.require_stream_of(stream as usize, owner)?;
            state.device_bytes(destination, count, owner)?.fill(value);
            Ok(String::new())
        })
    }
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
        assert_eq!(config.corrupt_read, None);
        assert_eq!(Config::parse("corrupt_read=17\n").corrupt_read, Some(17));
    }

    #[test]
    fn device_bytes_lie_in_one_allocation_of_the_context() {
        let mut state = State::default();
        let (first, second) = (DEVICE_POINTER_BASE, DEVICE_POINTER_BASE + 0x10);
        state.allocations.insert(first, 7);
        state.memory.insert(first, vec![FRESH_DEVICE_BYTE; 16]);
        state.allocations.insert(second, 8);
        state.memory.insert(second, vec![FRESH_DEVICE_BYTE; 16]);
        state.device_bytes(first + 4, 12, 7).unwrap().fill(1);
        assert_eq!(state.memory[&first][3..5], [FRESH_DEVICE_BYTE, 1]);
        assert_eq!(
            state.device_bytes(first + 4, 13, 7),
            Err(CUDA_ERROR_INVALID_VALUE)
        );
        assert_eq!(
            state.device_bytes(second, 1, 7),
            Err(CUDA_ERROR_INVALID_VALUE)
        );
        assert_eq!(
            state.device_bytes(first - 1, 1, 7),
            Err(CUDA_ERROR_INVALID_VALUE)
        );
        assert_eq!(
            state.device_bytes(second + 15, 1, 8).unwrap(),
            [FRESH_DEVICE_BYTE]
        );
    }

    #[test]
    fn fnv1a64_matches_the_published_vectors() {
        assert_eq!(fnv1a64(b""), " fnv1a64=cbf29ce484222325");
        assert_eq!(fnv1a64(b"a"), " fnv1a64=af63dc4c8601ec8c");
        assert_eq!(fnv1a64(b"foobar"), " fnv1a64=85944171f73967e8");
    }

    #[test]
    fn unescape_keeps_malformed_escapes_literal() {
        assert_eq!(unescape("a\\xZZ\\x4"), b"a\\xZZ\\x4");
        assert_eq!(unescape("\\x2f\\x00"), b"/\0");
    }
}

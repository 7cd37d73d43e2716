//! The driver inventory: `cuInit`, the driver version, the
//! device count and, per device, its handle, name and compute capability.
//! Never creates a context, allocates or runs a kernel.

use core::ffi::{c_char, c_int};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::generated::inventory_api::InventoryApi;
use crate::generated::spec::{
    reason_codes, COMPUTE_MAJOR_RANGE, COMPUTE_MINOR_RANGE, DEVICE_NAME_BUFFER_BYTES,
    DRIVER_ENVIRONMENT, DRIVER_VERSION_RANGE, MAX_DEVICES, MAX_LOADER_REASON_CHARS,
    PROBE_ERROR_STATUS, PROBE_UNAVAILABLE_STATUS, PROBE_UNSUPPORTED_STATUS,
};
use crate::name::sanitize_device_name;
use crate::report::{DeviceRow, Failure, ProbeReport, Target};
use rextio_cuda_loader::{DriverImage, LoadError};
use rextio_cuda_runtime::{CUdevice, CUresult, CUDA_ERROR_NO_DEVICE, CUDA_SUCCESS};

/// Proof that the driver environment (the spec's `driver_environment`) is set: no preloaded
/// libraries, no JIT. Only [`DriverEnvironment::set`] makes one, so every
/// path that can reach `cuInit` has set it first.
#[derive(Debug)]
pub struct DriverEnvironment {
    _private: (),
}

impl DriverEnvironment {
    /// Sets `CUDA_FORCE_PRELOAD_LIBRARIES=0`, `CUDA_DISABLE_JIT=1` and
    /// `CUDA_DEVICE_ORDER=PCI_BUS_ID` (ordinal N is the GPU `nvidia-smi`
    /// numbers N, not the driver's fastest-first order) for this process,
    /// and so for the driver, which reads them in `cuInit`.
    ///
    /// # Safety
    ///
    /// The process must have exactly one thread: `setenv` is not safe while
    /// another thread may read or write the environment (glibc's `getenv`
    /// takes no lock; Rust 2024 makes `set_var` unsafe for this reason).
    /// The probe and the smoke call this first thing in `main`, before any
    /// thread exists (std starts none, and no driver is loaded yet).
    pub unsafe fn set() -> Self {
        for (name, value) in DRIVER_ENVIRONMENT {
            std::env::set_var(name, value);
        }
        Self { _private: () }
    }
}

/// The probe's only option.
pub const DRIVER_ROOT_ARGUMENT: &str = "--driver-root";

/// The driver root the arguments name (`None`: the reviewed candidates), or
/// `INVALID_ARGUMENTS`, the reason code of the error record they get instead
/// (nothing is loaded then). The probe takes nothing, or exactly
/// `--driver-root DIR` (Linux); the loader refuses a relative DIR.
pub fn parse_arguments(arguments: &[OsString]) -> Result<Option<PathBuf>, &'static str> {
    match arguments {
        [] => Ok(None),
        [flag, dir] if flag == DRIVER_ROOT_ARGUMENT && cfg!(target_os = "linux") => {
            Ok(Some(PathBuf::from(dir)))
        }
        _ => Err(reason_codes::INVALID_ARGUMENTS),
    }
}

/// The record for arguments the probe does not take: status `error`,
/// nothing loaded.
pub fn argument_error(reason_code: &'static str) -> ProbeReport {
    ProbeReport::failed(
        Target::host(),
        Failure {
            status: PROBE_ERROR_STATUS,
            reason_code,
            platform_supported: rextio_cuda_loader::target_is_supported(),
            driver_loaded: false,
            driver_version: None,
            device_count: None,
            cuda_result: None,
        },
    )
}

/// Runs the whole probe and returns its report; never panics on driver data.
/// Looks for the driver through the reviewed loader: its candidates, or
/// only `driver_root` when given.
pub fn probe(_environment: &DriverEnvironment, driver_root: Option<&Path>) -> ProbeReport {
    let target = Target::host();
    match load_inventory_api(driver_root) {
        Ok(api) => inventory(&api, target),
        Err(error) => {
            explain_on_stderr(&error);
            ProbeReport {
                refusing_rule: error.refusing_rules().first().copied(),
                loader_reason: error.loader_reason().map(bounded_reason),
                ..ProbeReport::failed(target, load_failure(&error))
            }
        }
    }
}

/// The loader's path-free reason, at most `MAX_LOADER_REASON_CHARS` characters.
fn bounded_reason(reason: &str) -> String {
    let kept: String = reason.chars().take(MAX_LOADER_REASON_CHARS).collect();
    kept.trim_end().to_owned()
}

/// Opens the reviewed driver image and resolves the probe's inventory
/// table from it, which then owns the image.
pub fn load_inventory_api(driver_root: Option<&Path>) -> Result<InventoryApi, LoadError> {
    let image = rextio_cuda_loader::open_reviewed(driver_root)?;
    // SAFETY: `resolve_export` returns the address of the named export of
    // this image or None. The image is the reviewed CUDA driver, whose
    // exports have exactly the signatures the generated table lists, and the
    // table takes ownership of the image so the addresses stay valid.
    let api = unsafe { InventoryApi::resolve(image, DriverImage::resolve_export) }?;
    Ok(api)
}

/// The record carries only the reason code; a person reading stderr also
/// learns why: for each image found, the rule that refused it (one line
/// each), or the loader's one line (the export the driver lacks, ...). The
/// text holds paths, so never a record. A stderr that cannot be written
/// loses only this explanation.
pub fn explain_on_stderr(error: &LoadError) {
    let mut stderr = std::io::stderr().lock();
    match error {
        LoadError::DriverLoadFailed { refusals } => {
            for refusal in refusals {
                let _ = writeln!(stderr, "{refusal}");
            }
        }
        other => {
            let _ = writeln!(stderr, "{other}");
        }
    }
}

/// The report for a loader failure. A relative driver root is an argument
/// error (status `error`, nothing looked at).
pub fn load_failure(error: &LoadError) -> Failure {
    let unsupported = *error == LoadError::UnsupportedTarget;
    let status = match error {
        LoadError::UnsupportedTarget => PROBE_UNSUPPORTED_STATUS,
        LoadError::DriverRootNotAbsolute => PROBE_ERROR_STATUS,
        _ => PROBE_UNAVAILABLE_STATUS,
    };
    Failure {
        status,
        reason_code: error.reason_code(),
        platform_supported: rextio_cuda_loader::target_is_supported() && !unsupported,
        driver_loaded: error.driver_loaded(),
        driver_version: None,
        device_count: None,
        cuda_result: None,
    }
}

/// The report when something the driver started outlived the probe's sweep
/// (docs/interfaces.md, Probe runner): status `error`, whatever the inventory found, so the
/// preflight is not ready (fail closed).
pub fn survivors_report() -> ProbeReport {
    ProbeReport::failed(
        Target::host(),
        Failure {
            status: PROBE_ERROR_STATUS,
            reason_code: reason_codes::DRIVER_PROCESSES_SURVIVED,
            platform_supported: rextio_cuda_loader::target_is_supported(),
            driver_loaded: true,
            driver_version: None,
            device_count: None,
            cuda_result: None,
        },
    )
}

/// Inventories every device through a resolved table.
pub fn inventory(api: &InventoryApi, target: Target) -> ProbeReport {
    match collect(api) {
        Ok((driver_version, devices)) => ProbeReport::complete(target, driver_version, devices),
        Err(failure) => ProbeReport::failed(target, failure),
    }
}

/// A failure after the driver image loaded: status `unavailable`, as every
/// such failure has been since 0.1.0.
fn driver_failure(
    reason_code: &'static str,
    driver_version: Option<i32>,
    cuda_result: CUresult,
) -> Failure {
    Failure {
        status: PROBE_UNAVAILABLE_STATUS,
        reason_code,
        platform_supported: true,
        driver_loaded: true,
        driver_version,
        device_count: None,
        cuda_result: Some(cuda_result),
    }
}

/// No visible device: the version and a zero count, with the result of the
/// call that said so (`cuInit`'s 100, or `cuDeviceGetCount`'s 0).
fn no_devices(driver_version: i32, cuda_result: CUresult) -> Failure {
    Failure {
        device_count: Some(0),
        ..driver_failure(
            reason_codes::NO_CUDA_DEVICES,
            Some(driver_version),
            cuda_result,
        )
    }
}

fn check(
    result: CUresult,
    reason_code: &'static str,
    driver_version: Option<i32>,
) -> Result<(), Failure> {
    if result == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(driver_failure(reason_code, driver_version, result))
    }
}

fn collect(api: &InventoryApi) -> Result<(i32, Vec<DeviceRow>), Failure> {
    // The driver answers its version before cuInit (NVIDIA's 535, 550 and
    // 555 do), so every report after a load carries it.
    let mut driver_version: c_int = 0;
    // SAFETY: the table came from the reviewed driver image with the
    // generated signatures; the out-pointer names a live local c_int.
    let result = unsafe { (api.cuDriverGetVersion())(&mut driver_version) };
    check(result, reason_codes::CU_DRIVER_VERSION_FAILED, None)?;
    if !DRIVER_VERSION_RANGE.contains(&driver_version) {
        // The call succeeded but the value cannot be reported in schema 1.
        return Err(driver_failure(
            reason_codes::CU_DRIVER_VERSION_FAILED,
            None,
            result,
        ));
    }
    let known_version = Some(driver_version);

    // SAFETY: cuInit takes flags by value.
    let result = unsafe { (api.cuInit())(0) };
    if result == CUDA_ERROR_NO_DEVICE {
        return Err(no_devices(driver_version, result));
    }
    check(result, reason_codes::CU_INIT_FAILED, known_version)?;

    let mut count: c_int = 0;
    // SAFETY: the out-pointer names a live local c_int.
    let result = unsafe { (api.cuDeviceGetCount())(&mut count) };
    check(result, reason_codes::CU_DEVICE_COUNT_FAILED, known_version)?;
    let device_count = usize::try_from(count)
        .ok()
        .filter(|_| count <= MAX_DEVICES)
        .ok_or_else(|| driver_failure(reason_codes::INVALID_DEVICE_COUNT, known_version, result))?;
    if device_count == 0 {
        return Err(no_devices(driver_version, result));
    }

    let mut devices = Vec::with_capacity(device_count);
    for ordinal in 0..count {
        devices.push(device_row(api, ordinal, known_version)?);
    }
    Ok((driver_version, devices))
}

fn device_row(
    api: &InventoryApi,
    ordinal: c_int,
    driver_version: Option<i32>,
) -> Result<DeviceRow, Failure> {
    let mut device: CUdevice = 0;
    // SAFETY: the out-pointer names a live local CUdevice; ordinal is below
    // the count the driver reported.
    let result = unsafe { (api.cuDeviceGet())(&mut device, ordinal) };
    check(result, reason_codes::CU_DEVICE_GET_FAILED, driver_version)?;

    let mut name_buffer = [0u8; DEVICE_NAME_BUFFER_BYTES];
    let buffer_len = c_int::try_from(name_buffer.len()).unwrap_or(c_int::MAX);
    // SAFETY: the driver writes at most `buffer_len` bytes into the live,
    // zeroed local buffer of exactly that length.
    let result = unsafe {
        (api.cuDeviceGetName())(
            name_buffer.as_mut_ptr().cast::<c_char>(),
            buffer_len,
            device,
        )
    };
    check(result, reason_codes::CU_DEVICE_NAME_FAILED, driver_version)?;
    let name = sanitize_device_name(&name_buffer);

    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: both out-pointers name live local c_ints.
    let result = unsafe { (api.cuDeviceComputeCapability())(&mut major, &mut minor, device) };
    check(
        result,
        reason_codes::CU_DEVICE_CAPABILITY_FAILED,
        driver_version,
    )?;
    if !COMPUTE_MAJOR_RANGE.contains(&major) || !COMPUTE_MINOR_RANGE.contains(&minor) {
        return Err(driver_failure(
            reason_codes::INVALID_COMPUTE_CAPABILITY,
            driver_version,
            result,
        ));
    }

    let ordinal = u32::try_from(ordinal).unwrap_or_default();
    Ok(DeviceRow::new(ordinal, name, major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::RefCell;
    use core::ffi::{c_uint, c_void, CStr};
    use core::ptr::NonNull;

    use crate::generated::inventory_api::defaults as inventory_defaults;
    use crate::generated::spec::PROBE_COMPLETE_STATUS;

    /// What the fake driver of this thread answers.
    #[derive(Clone)]
    struct Fake {
        version: c_int,
        count: c_int,
        name: Vec<u8>,
        capability: (c_int, c_int),
        /// `(export name, result)`: that export fails and writes nothing.
        failing: Option<(&'static str, CUresult)>,
        /// The `len` each `cuDeviceGetName` call received.
        name_lengths: Vec<c_int>,
    }

    impl Default for Fake {
        fn default() -> Self {
            Self {
                version: 12040,
                count: 2,
                name: b"Fake GPU".to_vec(),
                capability: (8, 6),
                failing: None,
                name_lengths: Vec::new(),
            }
        }
    }

    thread_local! {
        static FAKE: RefCell<Fake> = RefCell::new(Fake::default());
    }

    fn fails(export: &str) -> Option<CUresult> {
        FAKE.with(|fake| {
            fake.borrow()
                .failing
                .filter(|(name, _)| *name == export)
                .map(|(_, result)| result)
        })
    }

    unsafe extern "system" fn fake_init(_flags: c_uint) -> CUresult {
        fails("cuInit").unwrap_or(CUDA_SUCCESS)
    }

    unsafe extern "system" fn fake_version(version: *mut c_int) -> CUresult {
        fails("cuDriverGetVersion").unwrap_or_else(|| {
            // SAFETY: the probe passes a live local c_int.
            unsafe { version.write(FAKE.with(|fake| fake.borrow().version)) };
            CUDA_SUCCESS
        })
    }

    unsafe extern "system" fn fake_count(count: *mut c_int) -> CUresult {
        fails("cuDeviceGetCount").unwrap_or_else(|| {
            // SAFETY: the probe passes a live local c_int.
            unsafe { count.write(FAKE.with(|fake| fake.borrow().count)) };
            CUDA_SUCCESS
        })
    }

    unsafe extern "system" fn fake_get(device: *mut CUdevice, ordinal: c_int) -> CUresult {
        fails("cuDeviceGet").unwrap_or_else(|| {
            // SAFETY: the probe passes a live local CUdevice.
            unsafe { device.write(ordinal + 100) };
            CUDA_SUCCESS
        })
    }

    /// A hostile driver: fills all `len` bytes, with no terminating NUL.
    unsafe extern "system" fn fake_name(
        name: *mut c_char,
        len: c_int,
        _device: CUdevice,
    ) -> CUresult {
        fails("cuDeviceGetName").unwrap_or_else(|| {
            let pattern = FAKE.with(|fake| {
                let mut fake = fake.borrow_mut();
                fake.name_lengths.push(len);
                fake.name.clone()
            });
            let len = usize::try_from(len).unwrap_or(0);
            for index in 0..len {
                // SAFETY: the caller promises `len` writable bytes (the
                // tests assert `len` is the probe's 256-byte buffer size).
                unsafe {
                    name.cast::<u8>()
                        .add(index)
                        .write(pattern[index % pattern.len()])
                };
            }
            CUDA_SUCCESS
        })
    }

    unsafe extern "system" fn fake_capability(
        major: *mut c_int,
        minor: *mut c_int,
        _device: CUdevice,
    ) -> CUresult {
        fails("cuDeviceComputeCapability").unwrap_or_else(|| {
            let (fake_major, fake_minor) = FAKE.with(|fake| fake.borrow().capability);
            // SAFETY: the probe passes two live local c_ints.
            unsafe {
                major.write(fake_major);
                minor.write(fake_minor);
            }
            CUDA_SUCCESS
        })
    }

    /// Every other listed export: succeeds without writing anything.
    struct Succeeds;

    impl inventory_defaults::DefaultCall for Succeeds {
        fn call(export_name: &'static str) -> CUresult {
            fails(export_name).unwrap_or(CUDA_SUCCESS)
        }
    }

    fn fake_export(_image: &(), name: &'static CStr) -> Option<NonNull<c_void>> {
        let address = match name.to_bytes() {
            b"cuInit" => fake_init as *const (),
            b"cuDriverGetVersion" => fake_version as *const (),
            b"cuDeviceGetCount" => fake_count as *const (),
            b"cuDeviceGet" => fake_get as *const (),
            b"cuDeviceGetName" => fake_name as *const (),
            b"cuDeviceComputeCapability" => fake_capability as *const (),
            _ => return inventory_defaults::default_export::<Succeeds>(name),
        };
        NonNull::new(address.cast_mut().cast())
    }

    /// The report of an inventory against `fake`, and the `len` arguments
    /// `cuDeviceGetName` saw.
    fn inventory_of(fake: Fake) -> (ProbeReport, Vec<c_int>) {
        FAKE.with(|cell| *cell.borrow_mut() = fake);
        // SAFETY: every fake export has exactly the listed signature and
        // lives for the whole program.
        let api = unsafe { InventoryApi::resolve((), fake_export) }.unwrap();
        let report = inventory(&api, Target::host());
        assert_schema_invariants(&report);
        let lengths = FAKE.with(|cell| core::mem::take(&mut cell.borrow_mut().name_lengths));
        (report, lengths)
    }

    /// The report's cross-field rules, as the provider's parser checks them.
    fn assert_schema_invariants(report: &ProbeReport) {
        if report.status == PROBE_COMPLETE_STATUS {
            assert_eq!(report.reason_code, None);
            assert!(report.platform_supported && report.driver_loaded);
            assert!(report.driver_version.is_some());
            assert_eq!(report.cuda_result, Some(0));
            let rows = i32::try_from(report.devices.len()).unwrap();
            assert!(rows >= 1 && report.device_count == Some(rows));
        } else {
            let code = report
                .reason_code
                .expect("a non-complete report names its reason");
            // ^[A-Z][A-Z0-9_]{0,63}$
            assert!((1..=64).contains(&code.len()), "{code}");
            assert!(code.starts_with(|c: char| c.is_ascii_uppercase()), "{code}");
            assert!(
                code.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
                "{code}"
            );
            assert!(report.devices.is_empty(), "{report:?}");
            assert!(matches!(report.device_count, None | Some(0)), "{report:?}");
        }
        if let Some(version) = report.driver_version {
            assert!(DRIVER_VERSION_RANGE.contains(&version));
        }
    }

    fn failure(
        reason: &str,
        version: Option<i32>,
        result: i32,
    ) -> (&str, &str, Option<i32>, Option<i32>, Option<i32>) {
        (
            PROBE_UNAVAILABLE_STATUS,
            reason,
            version,
            None,
            Some(result),
        )
    }

    fn summary(report: &ProbeReport) -> (&str, &str, Option<i32>, Option<i32>, Option<i32>) {
        assert!(report.platform_supported && report.driver_loaded);
        (
            report.status,
            report.reason_code.unwrap_or("-"),
            report.driver_version,
            report.device_count,
            report.cuda_result,
        )
    }

    #[test]
    fn a_full_unterminated_name_buffer_is_read_within_its_256_bytes() {
        let (report, lengths) = inventory_of(Fake {
            name: b"0123456789".to_vec(),
            ..Fake::default()
        });
        assert_eq!(report.status, PROBE_COMPLETE_STATUS);
        assert_eq!(lengths, [256, 256]);
        let expected: String = "0123456789".chars().cycle().take(160).collect();
        for (index, row) in report.devices.iter().enumerate() {
            assert_eq!(row.ordinal, u32::try_from(index).unwrap());
            assert_eq!(
                (row.name.as_str(), row.sm.as_str()),
                (expected.as_str(), "sm_86")
            );
        }
    }

    #[test]
    fn out_of_range_device_counts_are_refused_without_panicking() {
        for count in [-1, c_int::MIN, 1025, c_int::MAX] {
            let (report, lengths) = inventory_of(Fake {
                count,
                ..Fake::default()
            });
            assert_eq!(
                summary(&report),
                failure(reason_codes::INVALID_DEVICE_COUNT, Some(12040), 0),
                "{count}"
            );
            assert!(lengths.is_empty());
        }
        let (report, _) = inventory_of(Fake {
            count: 1024,
            ..Fake::default()
        });
        assert_eq!(report.device_count, Some(1024));
    }

    #[test]
    fn no_devices_is_unavailable_with_the_version_and_a_zero_count() {
        let (report, _) = inventory_of(Fake {
            count: 0,
            ..Fake::default()
        });
        assert_eq!(
            summary(&report),
            (
                PROBE_UNAVAILABLE_STATUS,
                reason_codes::NO_CUDA_DEVICES,
                Some(12040),
                Some(0),
                Some(0)
            )
        );
    }

    #[test]
    fn cu_init_no_device_is_unavailable_with_the_version_asked_first() {
        // cuInit returns immediately with 100 here, so the version in the
        // report proves cuDriverGetVersion was asked before cuInit.
        let (report, lengths) = inventory_of(Fake {
            failing: Some(("cuInit", CUDA_ERROR_NO_DEVICE)),
            ..Fake::default()
        });
        assert_eq!(
            summary(&report),
            (
                PROBE_UNAVAILABLE_STATUS,
                reason_codes::NO_CUDA_DEVICES,
                Some(12040),
                Some(0),
                Some(100)
            )
        );
        assert!(lengths.is_empty());
    }

    #[test]
    fn each_failing_call_is_named_with_its_result() {
        for (export, reason, version) in [
            ("cuInit", reason_codes::CU_INIT_FAILED, Some(12040)),
            (
                "cuDriverGetVersion",
                reason_codes::CU_DRIVER_VERSION_FAILED,
                None,
            ),
            (
                "cuDeviceGetCount",
                reason_codes::CU_DEVICE_COUNT_FAILED,
                Some(12040),
            ),
            (
                "cuDeviceGet",
                reason_codes::CU_DEVICE_GET_FAILED,
                Some(12040),
            ),
            (
                "cuDeviceGetName",
                reason_codes::CU_DEVICE_NAME_FAILED,
                Some(12040),
            ),
            (
                "cuDeviceComputeCapability",
                reason_codes::CU_DEVICE_CAPABILITY_FAILED,
                Some(12040),
            ),
        ] {
            for result in [1, -7, i32::MAX] {
                let (report, _) = inventory_of(Fake {
                    failing: Some((export, result)),
                    ..Fake::default()
                });
                assert_eq!(
                    summary(&report),
                    failure(reason, version, result),
                    "{export}"
                );
            }
        }
    }

    #[test]
    fn implausible_versions_and_capabilities_are_refused() {
        for version in [0, 999, 100_000, -1] {
            let (report, _) = inventory_of(Fake {
                version,
                ..Fake::default()
            });
            assert_eq!(
                summary(&report),
                failure(reason_codes::CU_DRIVER_VERSION_FAILED, None, 0)
            );
        }
        for capability in [(0, 0), (100, 0), (8, 100), (8, -1), (-1, 5)] {
            let (report, _) = inventory_of(Fake {
                capability,
                ..Fake::default()
            });
            assert_eq!(
                summary(&report),
                failure(reason_codes::INVALID_COMPUTE_CAPABILITY, Some(12040), 0),
                "{capability:?}"
            );
        }
    }

    #[test]
    fn the_probe_takes_nothing_or_exactly_a_driver_root() {
        let args = |items: &[&str]| -> Vec<OsString> { items.iter().map(OsString::from).collect() };
        assert_eq!(parse_arguments(&[]), Ok(None));
        assert_eq!(
            parse_arguments(&args(&["--driver-root", "/usr/local/cuda/compat"])),
            Ok(Some(PathBuf::from("/usr/local/cuda/compat")))
        );
        for other in [
            &["--driver-root"][..],
            &["--driver-root=/usr/lib"],
            &["--driver-root", "/a", "/b"],
            &["--driver-root", "/a", "--driver-root", "/b"],
            &["--device", "0"],
            &["/usr/lib"],
            &["--help"],
            &[""],
        ] {
            assert_eq!(
                parse_arguments(&args(other)),
                Err(reason_codes::INVALID_ARGUMENTS),
                "{other:?}"
            );
        }
        let report = argument_error(reason_codes::INVALID_ARGUMENTS);
        assert_schema_invariants(&report);
        assert_eq!(
            (report.status, report.reason_code, report.driver_loaded),
            (
                PROBE_ERROR_STATUS,
                Some(reason_codes::INVALID_ARGUMENTS),
                false
            )
        );
    }

    #[test]
    fn a_relative_driver_root_gets_an_error_record_and_loads_nothing() {
        // The proof without setting the environment: a relative root is
        // refused before anything is loaded, so `cuInit` is never reached.
        let environment = DriverEnvironment { _private: () };
        let args = |dir: &str| vec![OsString::from("--driver-root"), OsString::from(dir)];
        for relative in ["usr/local/cuda/compat", "./compat", "", "~/compat"] {
            let root = parse_arguments(&args(relative)).unwrap().unwrap();
            let report = probe(&environment, Some(&root));
            assert_schema_invariants(&report);
            assert_eq!(
                (report.status, report.reason_code, report.driver_loaded),
                (
                    PROBE_ERROR_STATUS,
                    Some(reason_codes::DRIVER_ROOT_NOT_ABSOLUTE),
                    false
                ),
                "{relative:?}"
            );
            assert!(report.platform_supported);
        }
    }

    #[test]
    fn survivors_make_an_error_report_that_is_never_ready() {
        let report = survivors_report();
        assert_schema_invariants(&report);
        assert_eq!(
            (report.status, report.reason_code, report.devices.len()),
            (
                PROBE_ERROR_STATUS,
                Some(reason_codes::DRIVER_PROCESSES_SURVIVED),
                0
            )
        );
    }

    #[test]
    fn loader_failures_map_to_their_report_fields() {
        let cases = [
            (
                LoadError::DriverNotFound {
                    searched: Vec::new(),
                },
                "LIBCUDA_SO_NOT_FOUND",
                PROBE_UNAVAILABLE_STATUS,
                true,
                false,
            ),
            (
                LoadError::DriverLoadFailed {
                    refusals: Vec::new(),
                },
                "LIBCUDA_SO_LOAD_FAILED",
                PROBE_UNAVAILABLE_STATUS,
                true,
                false,
            ),
            (
                LoadError::NvcudaNotFound,
                "NVCUDA_DLL_NOT_FOUND",
                PROBE_UNAVAILABLE_STATUS,
                true,
                false,
            ),
            (
                LoadError::SymbolMissing {
                    export_name: "cuInit",
                },
                "REQUIRED_SYMBOL_MISSING",
                PROBE_UNAVAILABLE_STATUS,
                true,
                true,
            ),
            (
                LoadError::UnsupportedTarget,
                "UNSUPPORTED_TARGET",
                PROBE_UNSUPPORTED_STATUS,
                false,
                false,
            ),
            (
                LoadError::DriverRootNotAbsolute,
                "DRIVER_ROOT_NOT_ABSOLUTE",
                PROBE_ERROR_STATUS,
                true,
                false,
            ),
        ];
        for (error, code, status, platform_supported, driver_loaded) in cases {
            let report = ProbeReport::failed(Target::host(), load_failure(&error));
            assert_schema_invariants(&report);
            assert_eq!(
                (
                    report.reason_code,
                    report.status,
                    report.platform_supported,
                    report.driver_loaded
                ),
                (Some(code), status, platform_supported, driver_loaded)
            );
            assert_eq!(
                (
                    report.driver_version,
                    report.device_count,
                    report.cuda_result
                ),
                (None, None, None)
            );
        }
    }
}

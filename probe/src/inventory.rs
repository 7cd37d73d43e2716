//! The driver inventory (contract §6): `cuInit`, the driver version, the
//! device count and, per device, its handle, name and compute capability.
//! Never creates a context, allocates or runs a kernel.

use core::ffi::{c_char, c_int};

use crate::generated::inventory_api::{CUdevice, CUresult, InventoryApi, CUDA_SUCCESS};
use crate::generated::spec::{
    reason_codes, COMPUTE_MAJOR_RANGE, COMPUTE_MINOR_RANGE, DEVICE_NAME_BUFFER_BYTES,
    DRIVER_ENVIRONMENT, DRIVER_VERSION_RANGE, MAX_DEVICES,
};
use crate::loader::{self, LoadError};
use crate::name::sanitize_device_name;
use crate::report::{
    DeviceRow, Failure, ProbeReport, Target, STATUS_ERROR, STATUS_UNAVAILABLE, STATUS_UNSUPPORTED,
};

/// Sets the driver environment the contract requires before `cuInit`: no
/// preloaded libraries, no JIT.
///
/// Call while the process is still single-threaded (start of `main`).
pub fn set_driver_environment() {
    for (name, value) in DRIVER_ENVIRONMENT {
        std::env::set_var(name, value);
    }
}

/// Runs the whole probe and returns its report; never panics on driver data.
pub fn probe() -> ProbeReport {
    let target = Target::host();
    if !loader::target_is_supported() {
        return ProbeReport::failed(target, load_failure(LoadError::UnsupportedTarget));
    }
    set_driver_environment();
    match loader::load_inventory_api() {
        Ok(api) => inventory(&api, target),
        Err(error) => ProbeReport::failed(target, load_failure(error)),
    }
}

/// The report for a loader failure.
pub fn load_failure(error: LoadError) -> Failure {
    let status = match error {
        LoadError::UnsupportedTarget => STATUS_UNSUPPORTED,
        _ => STATUS_UNAVAILABLE,
    };
    Failure {
        status,
        reason_code: error.reason_code(),
        platform_supported: error != LoadError::UnsupportedTarget,
        driver_loaded: error.driver_loaded(),
        driver_version: None,
        device_count: None,
        cuda_result: None,
    }
}

/// Inventories every device through a resolved table.
pub fn inventory(api: &InventoryApi, target: Target) -> ProbeReport {
    match collect(api) {
        Ok((driver_version, devices)) => ProbeReport::complete(target, driver_version, devices),
        Err(failure) => ProbeReport::failed(target, failure),
    }
}

fn driver_failure(
    reason_code: &'static str,
    driver_version: Option<i32>,
    cuda_result: CUresult,
) -> Failure {
    Failure {
        status: STATUS_ERROR,
        reason_code,
        platform_supported: true,
        driver_loaded: true,
        driver_version,
        device_count: None,
        cuda_result: Some(cuda_result),
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
    // SAFETY: the table came from the reviewed driver image with the
    // generated signatures; cuInit takes flags by value.
    let result = unsafe { (api.cuInit)(0) };
    check(result, reason_codes::CU_INIT_FAILED, None)?;

    let mut driver_version: c_int = 0;
    // SAFETY: the out-pointer names a live local c_int.
    let result = unsafe { (api.cuDriverGetVersion)(&mut driver_version) };
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

    let mut count: c_int = 0;
    // SAFETY: the out-pointer names a live local c_int.
    let result = unsafe { (api.cuDeviceGetCount)(&mut count) };
    check(result, reason_codes::CU_DEVICE_COUNT_FAILED, known_version)?;
    let device_count = usize::try_from(count)
        .ok()
        .filter(|_| count <= MAX_DEVICES)
        .ok_or_else(|| driver_failure(reason_codes::INVALID_DEVICE_COUNT, known_version, result))?;
    if device_count == 0 {
        return Err(Failure {
            status: STATUS_UNAVAILABLE,
            device_count: Some(0),
            ..driver_failure(reason_codes::NO_CUDA_DEVICES, known_version, result)
        });
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
    let result = unsafe { (api.cuDeviceGet)(&mut device, ordinal) };
    check(result, reason_codes::CU_DEVICE_GET_FAILED, driver_version)?;

    let mut name_buffer = [0u8; DEVICE_NAME_BUFFER_BYTES];
    let buffer_len = c_int::try_from(name_buffer.len()).unwrap_or(c_int::MAX);
    // SAFETY: the driver writes at most `buffer_len` bytes into the live,
    // zeroed local buffer of exactly that length.
    let result = unsafe {
        (api.cuDeviceGetName)(
            name_buffer.as_mut_ptr().cast::<c_char>(),
            buffer_len,
            device,
        )
    };
    check(result, reason_codes::CU_DEVICE_NAME_FAILED, driver_version)?;
    let name = sanitize_device_name(&name_buffer);

    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: both out-pointers name live local c_ints.
    let result = unsafe { (api.cuDeviceComputeCapability)(&mut major, &mut minor, device) };
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

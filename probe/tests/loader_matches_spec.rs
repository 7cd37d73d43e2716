//! The reviewed loader ships alone as source, so it holds its reason codes
//! itself; the provider spec owns them, and the probe's generated constants
//! are the spec's. This test fails when the two disagree (xtask's
//! `loader_facts` checks the loader's other facts against the spec's text).

use rextio_cuda_loader::reason_codes as loader_codes;
use rextio_cuda_probe::generated::spec::reason_codes as spec_codes;

#[test]
fn the_loader_reason_codes_are_the_spec_codes() {
    let pairs = [
        (
            loader_codes::LIBCUDA_SO_NOT_FOUND,
            spec_codes::LIBCUDA_SO_NOT_FOUND,
        ),
        (
            loader_codes::LIBCUDA_SO_LOAD_FAILED,
            spec_codes::LIBCUDA_SO_LOAD_FAILED,
        ),
        (
            loader_codes::NVCUDA_DLL_NOT_FOUND,
            spec_codes::NVCUDA_DLL_NOT_FOUND,
        ),
        (
            loader_codes::UNSUPPORTED_TARGET,
            spec_codes::UNSUPPORTED_TARGET,
        ),
        (
            loader_codes::REQUIRED_SYMBOL_MISSING,
            spec_codes::REQUIRED_SYMBOL_MISSING,
        ),
        (
            loader_codes::DRIVER_ROOT_NOT_ABSOLUTE,
            spec_codes::DRIVER_ROOT_NOT_ABSOLUTE,
        ),
    ];
    for (loader, spec) in pairs {
        assert_eq!(loader, spec);
    }
}

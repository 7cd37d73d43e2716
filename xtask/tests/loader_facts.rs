//! The reviewed loader ships alone as source, so it holds its facts itself;
//! the provider spec (`templates/provider-spec.json`) owns the text a person
//! reads about them. These tests fail when the two disagree.

use rextio_cuda_loader::Rejection;

fn spec() -> serde_json::Value {
    serde_json::from_str(include_str!("../../templates/provider-spec.json")).unwrap()
}

#[test]
fn the_load_failed_remedy_explains_every_rule_stderr_can_name() {
    let spec = spec();
    let remedy = spec["reason_codes"]["LIBCUDA_SO_LOAD_FAILED"][1]
        .as_str()
        .unwrap();
    for rejection in Rejection::ALL {
        let rule = rejection.rule();
        assert!(
            remedy.contains(&format!("{rule} (")) || remedy.contains(&format!("{rule},")),
            "{rule}"
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn the_not_found_explanation_lists_every_location_searched_in_order() {
    use rextio_cuda_loader::reviewed::{LINUX_AARCH64_CANDIDATE_DIRS, LINUX_X86_64_CANDIDATE_DIRS};

    let spec = spec();
    let explanation = spec["reason_codes"]["LIBCUDA_SO_NOT_FOUND"][0]
        .as_str()
        .unwrap();
    for (arch, dirs) in [
        ("x86_64", LINUX_X86_64_CANDIDATE_DIRS),
        ("aarch64", LINUX_AARCH64_CANDIDATE_DIRS),
    ] {
        let listed = format!("on Linux {arch} {}", dirs.join(", "));
        assert!(
            explanation.contains(&listed),
            "{listed:?} not in {explanation:?}"
        );
    }
}

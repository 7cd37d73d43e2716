//! The driver image is never unloaded: after every table and
//! every resource made from it is dropped, the image the reviewed loader
//! opened is still mapped into the process.
//!
//! The driver here is a small C library compiled for the test (every listed
//! export; the few that hand out handles write fixed non-null ones), placed
//! in a root-owned private tree that the loader searches instead of the
//! system locations. Runs as root, as `cargo xtask test` does.
#![cfg(all(
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

use rextio_cuda_loader::open_reviewed_in;
use rextio_cuda_loader::reviewed::Search;
use rextio_cuda_runtime::{device_get, initialize, Context, DRIVER_EXPORT_NAMES};

/// Bodies of the exports that must write a handle; every other export
/// returns success and touches nothing.
const HANDLE_WRITERS: &[(&str, &str)] = &[
    (
        "cuDeviceGet",
        "int cuDeviceGet(int *d, int o) { *d = o; return 0; }",
    ),
    (
        "cuCtxCreate_v2",
        "int cuCtxCreate_v2(void **c, unsigned f, int d) { *c = (void *)0x1000; return 0; }",
    ),
    (
        "cuCtxPopCurrent_v2",
        "int cuCtxPopCurrent_v2(void **c) { if (c) *c = (void *)0x1000; return 0; }",
    ),
    (
        "cuStreamCreate",
        "int cuStreamCreate(void **s, unsigned f) { *s = (void *)0x2000; return 0; }",
    ),
    (
        "cuMemAlloc_v2",
        "int cuMemAlloc_v2(unsigned long long *p, unsigned long n) { *p = 0x3000; return 0; }",
    ),
];

fn driver_source() -> String {
    let mut source = String::new();
    for name in DRIVER_EXPORT_NAMES {
        let name = name.to_str().unwrap();
        match HANDLE_WRITERS.iter().find(|(writer, _)| *writer == name) {
            Some((_, body)) => source.push_str(body),
            None => source.push_str(&format!("int {name}(void) {{ return 0; }}")),
        }
        source.push('\n');
    }
    source
}

fn compile(source: &Path, output: &Path) {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&compiler)
        .args(["-shared", "-fPIC", "-o"])
        .arg(output)
        .arg(source)
        .status()
        .unwrap_or_else(|error| panic!("cannot run {compiler} (a C compiler is needed): {error}"));
    assert!(status.success(), "{compiler} failed");
}

fn is_mapped(image: &Path) -> bool {
    let maps = fs::read_to_string("/proc/self/maps").unwrap();
    let shown = image.to_str().unwrap();
    maps.lines().any(|line| line.ends_with(shown))
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A root-owned private `/usr` with `lib/nvidia/libcuda.so.1`; removed on drop.
struct Tree {
    base: PathBuf,
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

#[test]
fn the_driver_stays_mapped_after_every_table_and_resource_is_dropped() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "runs as root (cargo xtask test does)"
    );
    let base = fs::canonicalize(std::env::temp_dir())
        .unwrap()
        .join(format!("rextio-mapped-{}", std::process::id()));
    let tree = Tree { base };
    let floor = tree.base.join("usr");
    let directory = floor.join("lib/nvidia");
    fs::create_dir_all(&directory).unwrap();
    for dir in [&tree.base, &floor, &floor.join("lib"), &directory] {
        set_mode(dir, 0o755);
    }
    let source = tree.base.join("driver.c");
    fs::write(&source, driver_source()).unwrap();
    let image = directory.join("libcuda.so.1");
    compile(&source, &image);
    set_mode(&image, 0o644);

    // The check can fail: a copy loaded without RTLD_NODELETE is unmapped
    // when its last handle goes.
    let control = tree.base.join("control.so");
    fs::copy(&image, &control).unwrap();
    // SAFETY: the test's own stub library; its initializers do nothing.
    let library = unsafe { libloading::Library::new(&control) }.unwrap();
    assert!(is_mapped(&control));
    drop(library);
    assert!(!is_mapped(&control), "the control copy should unload");

    let search = Search {
        candidates: vec![image.clone()],
        roots: vec![floor.join("lib")],
        floor,
    };
    let api = open_reviewed_in(&search)
        .unwrap()
        .into_driver_api()
        .unwrap();
    // A second table from a second open of the same reviewed image, as the
    // probe resolves its own inventory table.
    let second = open_reviewed_in(&search)
        .unwrap()
        .into_driver_api()
        .unwrap();
    initialize(&api).unwrap();
    let device = device_get(&api, 0).unwrap();
    let context = Context::create(Rc::clone(&api), device).unwrap();
    let stream = context.create_stream().unwrap();
    let allocation = context.allocate(4096).unwrap();
    assert!(is_mapped(&image));
    drop(allocation);
    drop(stream);
    drop(context);
    drop(api);
    drop(second);
    assert!(
        is_mapped(&image),
        "the driver image was unloaded after its tables were dropped"
    );
}

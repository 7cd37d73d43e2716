//! Proof that no source links to cuda/nvcuda, run by `cargo test` (this
//! module is its tests): (1) a `syn` scan of every Rust source (workspace
//! and every source tarball) for link attributes and foreign blocks, plus
//! build scripts that emit link instructions; (2) no Cargo.toml declares
//! `links`; (3) the runtime and the loader built as cdylibs need no CUDA
//! library (`nolink::check_dynamic_section`).

use quote::ToTokens;
use syn::visit::Visit;

use crate::nolink::check_dynamic_section;
use crate::paths::{at, crate_tarballs, regular_files, repo_root, target_dir};
use crate::process::run;
use crate::Result;

/// The only crate whose sources may hold foreign blocks: the simulated
/// driver (it exports the CUDA symbols; it never imports them).
const FOREIGN_BLOCKS_ALLOWED_UNDER: &str = "tests/sim-driver/";
/// Directories never scanned: build output, VCS data, virtual environments.
const SKIPPED_DIRS: [&str; 3] = ["target", "node_modules", "__pycache__"];

/// syn scan of every Rust source in the workspace and in every source tarball.
fn scan_sources() -> Result<()> {
    let (mut problems, mut scanned) = (Vec::new(), 0);
    let mut scan = |path: &str, text: &str| {
        let name = path.rsplit('/').next().unwrap_or("");
        if name.ends_with(".rs") {
            scanned += 1;
            let allow_foreign = path.starts_with(FOREIGN_BLOCKS_ALLOWED_UNDER);
            problems.extend(scan_rust(path, text, allow_foreign));
            if name == "build.rs" {
                problems.extend(scan_build_script(path, text));
            }
        } else if name == "Cargo.toml" {
            problems.extend(scan_manifest(path, text));
        }
    };
    let root = repo_root();
    let enter = |name: &str| !name.starts_with('.') && !SKIPPED_DIRS.contains(&name);
    for path in regular_files(&root, enter)? {
        if path.to_string_lossy().ends_with(".rs") || path.ends_with("Cargo.toml") {
            let relative = path.strip_prefix(&root).unwrap_or(&path).to_string_lossy();
            let text = std::fs::read_to_string(&path).map_err(at(&path))?;
            scan(&relative, &text);
        }
    }
    for tarball in &crate_tarballs(&root)? {
        let file = std::fs::File::open(tarball).map_err(at(tarball))?;
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
        for entry in archive.entries().map_err(at(tarball))? {
            let mut entry = entry.map_err(at(tarball))?;
            let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let name = format!("{}!{name}", tarball.display());
            let text = std::io::read_to_string(&mut entry);
            let text = text.map_err(|error| format!("{name}: not UTF-8 text: {error}"))?;
            scan(&name, &text);
        }
    }
    if !problems.is_empty() {
        let problems = problems.join("\n  ");
        return Err(format!("link to a CUDA library found:\n  {problems}"));
    }
    println!("nolink: {scanned} Rust sources and every Cargo.toml hold no link to cuda");
    Ok(())
}

/// Finds link attributes and forbidden foreign blocks in one Rust source.
fn scan_rust(path: &str, text: &str, allow_foreign_blocks: bool) -> Vec<String> {
    let mut scanner = LinkScanner {
        allow_foreign_blocks,
        problems: Vec::new(),
    };
    if let Err(error) = syn::parse_file(text).map(|file| scanner.visit_file(&file)) {
        let why = format!("{path}: does not parse, so cannot be checked: {error}");
        return vec![why];
    }
    let located = |(line, what): (usize, String)| format!("{path}:{line}: {what}");
    scanner.problems.into_iter().map(located).collect()
}

struct LinkScanner {
    allow_foreign_blocks: bool,
    /// (line, what)
    problems: Vec<(usize, String)>,
}

/// True when `tokens` hold the identifier `link` (e.g. inside `cfg_attr`).
fn mentions_link(tokens: proc_macro2::TokenStream) -> bool {
    tokens.into_iter().any(|tree| match tree {
        proc_macro2::TokenTree::Ident(ident) => ident == "link",
        proc_macro2::TokenTree::Group(group) => mentions_link(group.stream()),
        _ => false,
    })
}

impl<'ast> Visit<'ast> for LinkScanner {
    fn visit_attribute(&mut self, attribute: &'ast syn::Attribute) {
        let path = attribute.path();
        let line = attribute.pound_token.spans[0].start().line;
        if path.is_ident("link") {
            self.problems
                .push((line, "`#[link(...)]` attribute".into()));
        } else if path.is_ident("cfg_attr") && mentions_link(attribute.meta.to_token_stream()) {
            let what = "`#[cfg_attr(..., link(...))]` attribute";
            self.problems.push((line, what.into()));
        }
        syn::visit::visit_attribute(self, attribute);
    }

    fn visit_item_foreign_mod(&mut self, block: &'ast syn::ItemForeignMod) {
        for item in &block.items {
            if let syn::ForeignItem::Fn(function) = item {
                let (name, line) = (&function.sig.ident, function.sig.ident.span().start().line);
                let lower = name.to_string().to_ascii_lowercase();
                if lower.starts_with("cu") || lower.contains("cuda") {
                    let what = format!("foreign block declares CUDA function `{name}`");
                    self.problems.push((line, what));
                }
            }
        }
        if !self.allow_foreign_blocks {
            let line = block.abi.extern_token.span.start().line;
            let what = "foreign `extern` block (symbols come only from the reviewed loader)";
            self.problems.push((line, what.to_owned()));
        }
        syn::visit::visit_item_foreign_mod(self, block);
    }
}

/// A build script must not tell cargo to link or where to search.
fn scan_build_script(path: &str, text: &str) -> Vec<String> {
    ["rustc-link-lib", "rustc-link-search", "rustc-link-arg"]
        .iter()
        .filter(|instruction| text.contains(*instruction))
        .map(|instruction| format!("{path}: build script emits `{instruction}`"))
        .collect()
}

/// No package may declare `links` (which announces a native library).
fn scan_manifest(path: &str, text: &str) -> Vec<String> {
    let manifest = match text.parse::<toml_edit::DocumentMut>() {
        Ok(manifest) => manifest,
        Err(error) => return vec![format!("{path}: not TOML, so cannot be checked: {error}")],
    };
    let package = manifest
        .get("package")
        .and_then(|item| item.as_table_like());
    match package.and_then(|package| package.get("links")) {
        Some(_) => vec![format!("{path}: `links` key in [package]")],
        None => Vec::new(),
    }
}

/// The library crates a host builds into its own binary: each built as a
/// cdylib must need no CUDA library.
const LIBRARY_CRATES: [(&str, &str); 2] = [
    ("rextio-cuda-runtime", "librextio_cuda_runtime.so"),
    ("rextio-cuda-loader", "librextio_cuda_loader.so"),
];

/// Builds the runtime and the loader as cdylibs (`cargo rustc`), then checks
/// each one's dynamic section.
fn check_library_cdylibs() -> Result<()> {
    // A target directory of its own: a cdylib build must not disturb the rlib's.
    let build_dir = target_dir().join("nolink-cdylib");
    for (package, library) in LIBRARY_CRATES {
        run(crate::native::cargo()
            .env("CARGO_TARGET_DIR", &build_dir)
            .args(["rustc", "--locked", "--lib", "--crate-type", "cdylib"])
            .args(["--package", package]))?;
        check_dynamic_section(&build_dir.join("debug").join(library))?;
    }
    Ok(())
}

#[test]
fn the_workspace_and_the_source_tarballs_hold_no_link() {
    scan_sources().unwrap();
}

#[test]
#[cfg(target_os = "linux")]
fn the_runtime_and_the_loader_built_as_cdylibs_need_no_cuda() {
    check_library_cdylibs().unwrap();
}

mod tests {
    use super::*;

    #[test]
    fn link_attribute_is_rejected() {
        let problems = scan_rust("x.rs", "#[link(name = \"cuda\")]\nextern \"C\" {}\n", true);
        assert!(
            problems.iter().any(|p| p.contains("#[link(...)]")),
            "{problems:?}"
        );
        let problems = scan_rust(
            "x.rs",
            "#[cfg_attr(unix, link(name = \"cuda\"))]\nextern \"C\" {}\n",
            true,
        );
        assert!(
            problems.iter().any(|p| p.contains("cfg_attr")),
            "{problems:?}"
        );
    }

    #[test]
    fn foreign_block_declaring_cu_init_is_rejected() {
        let source = "extern \"system\" {\n    fn cuInit(flags: u32) -> i32;\n}\n";
        let problems = scan_rust("x.rs", source, true);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("x.rs:2: foreign block declares CUDA function `cuInit`"));
        let problems = scan_rust(
            "x.rs",
            "extern \"C\" { fn strlen(s: *const u8) -> usize; }",
            false,
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("foreign `extern` block")),
            "{problems:?}"
        );
    }

    #[test]
    fn clean_source_passes() {
        let source = "#[no_mangle]\npub extern \"system\" fn cuInit(_flags: u32) -> i32 { 0 }\n\
                      pub fn f(api: &Api) -> i32 { unsafe { (api.cuInit)(0) } }\n";
        assert!(scan_rust("x.rs", source, false).is_empty());
    }

    #[test]
    fn build_scripts_and_links_keys_are_rejected() {
        let script = "fn main() { println!(\"cargo::rustc-link-lib=cuda\"); }";
        assert_eq!(scan_build_script("build.rs", script).len(), 1);
        assert!(scan_build_script("build.rs", "fn main() {}").is_empty());
        let manifest = "[package]\nname = \"x\"\nlinks = \"cuda\"\n";
        assert_eq!(
            scan_manifest("Cargo.toml", manifest),
            ["Cargo.toml: `links` key in [package]"]
        );
        let dotted = "package.name = \"x\"\npackage.links = \"cuda\"\n";
        assert_eq!(scan_manifest("Cargo.toml", dotted).len(), 1);
        let broken = scan_manifest("Cargo.toml", "[package\n");
        assert!(broken[0].starts_with("Cargo.toml: not TOML"), "{broken:?}");
        assert!(scan_manifest("Cargo.toml", "[package]\nname = \"links\"\n").is_empty());
    }
}

//! Proof that nothing links to cuda/nvcuda, three ways: (1) a `syn` scan of
//! every Rust source (workspace and runtime tarball) for link attributes and
//! foreign blocks, plus build scripts that emit link instructions; (2) no
//! Cargo.toml declares `links`; (3) the dynamic section of built binaries
//! names no CUDA library.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use syn::visit::Visit;

use crate::paths::{repo_root, target_dir};
use crate::process::run;
use crate::scratch::ScratchDir;
use crate::Result;

/// The only crate whose sources may hold foreign blocks: the simulated
/// driver (it exports the CUDA symbols; it never imports them).
const FOREIGN_BLOCKS_ALLOWED_UNDER: &str = "tests/sim-driver/";
/// Directories never scanned: build output, VCS data, virtual environments.
const SKIPPED_DIRS: [&str; 3] = ["target", "node_modules", "__pycache__"];

/// syn scan of every Rust source in the workspace and in the runtime tarball.
pub fn scan_sources() -> Result<()> {
    let root = repo_root();
    let mut problems = Vec::new();
    let mut scanned = 0;
    for path in workspace_files(&root)? {
        let relative = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&path)
            .map_err(|error| format!("{relative}: cannot read: {error}"))?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(".rs") {
            scanned += 1;
            let allow_foreign = relative.starts_with(FOREIGN_BLOCKS_ALLOWED_UNDER);
            problems.extend(scan_rust(&relative, &text, allow_foreign));
            if name == "build.rs" {
                problems.extend(scan_build_script(&relative, &text));
            }
        } else if name == "Cargo.toml" {
            problems.extend(scan_manifest(&relative, &text));
        }
    }
    let tarball = find_runtime_tarball(&root)?;
    for (entry, text) in tarball_sources(&tarball)? {
        let name = entry.rsplit('/').next().unwrap_or("");
        if entry.ends_with(".rs") {
            scanned += 1;
            problems.extend(scan_rust(&entry, &text, false));
            if name == "build.rs" {
                problems.extend(scan_build_script(&entry, &text));
            }
        } else if name == "Cargo.toml" {
            problems.extend(scan_manifest(&entry, &text));
        }
    }
    if problems.is_empty() {
        println!("nolink: {scanned} Rust sources and every Cargo.toml hold no link to cuda");
        Ok(())
    } else {
        Err(format!(
            "link to a CUDA library found:\n  {}",
            problems.join("\n  ")
        ))
    }
}

fn workspace_files(root: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|error| format!("{}: cannot list: {error}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|error| format!("{}: {error}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry
                .file_type()
                .map_err(|error| format!("{name}: {error}"))?;
            if kind.is_dir() {
                if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) {
                    pending.push(entry.path());
                }
            } else if kind.is_file() && (name.ends_with(".rs") || name == "Cargo.toml") {
                found.push(entry.path());
            }
        }
    }
    found.sort();
    Ok(found)
}

fn find_runtime_tarball(root: &Path) -> Result<PathBuf> {
    let dir = root.join("generated");
    let mut tarballs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|error| format!("generated/: cannot list: {error}"))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.to_string_lossy().ends_with(".tar.gz"))
        .collect();
    tarballs.sort();
    match tarballs.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "generated/ should hold exactly one runtime tarball, found {}",
            tarballs.len()
        )),
    }
}

/// The text files of a `.tar.gz`, as (entry path, text).
fn tarball_sources(path: &Path) -> Result<Vec<(String, String)>> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|error| format!("{shown}: {error}"))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut files = Vec::new();
    for entry in archive
        .entries()
        .map_err(|error| format!("{shown}: {error}"))?
    {
        let mut entry = entry.map_err(|error| format!("{shown}: {error}"))?;
        let name = format!("{shown}!{}", String::from_utf8_lossy(&entry.path_bytes()));
        let mut text = String::new();
        entry
            .read_to_string(&mut text)
            .map_err(|error| format!("{name}: not UTF-8 text: {error}"))?;
        files.push((name, text));
    }
    Ok(files)
}

fn is_cuda_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.starts_with("cu") || lower.contains("cuda")
}

/// Finds link attributes and forbidden foreign blocks in one Rust source.
pub fn scan_rust(path: &str, text: &str, allow_foreign_blocks: bool) -> Vec<String> {
    let file = match syn::parse_file(text) {
        Ok(file) => file,
        Err(error) => {
            return vec![format!(
                "{path}: does not parse, so cannot be checked: {error}"
            )]
        }
    };
    let mut scanner = LinkScanner {
        path,
        allow_foreign_blocks,
        problems: Vec::new(),
    };
    scanner.visit_file(&file);
    scanner.problems
}

struct LinkScanner<'a> {
    path: &'a str,
    allow_foreign_blocks: bool,
    problems: Vec<String>,
}

impl LinkScanner<'_> {
    fn report(&mut self, span: proc_macro2::Span, what: String) {
        let line = span.start().line;
        self.problems.push(format!("{}:{line}: {what}", self.path));
    }
}

/// True when `tokens` hold the identifier `link` (e.g. inside `cfg_attr`).
fn mentions_link(tokens: proc_macro2::TokenStream) -> bool {
    tokens.into_iter().any(|tree| match tree {
        proc_macro2::TokenTree::Ident(ident) => ident == "link",
        proc_macro2::TokenTree::Group(group) => mentions_link(group.stream()),
        _ => false,
    })
}

impl<'ast> Visit<'ast> for LinkScanner<'_> {
    fn visit_attribute(&mut self, attribute: &'ast syn::Attribute) {
        let path = attribute.path();
        let span = path
            .segments
            .first()
            .map_or_else(proc_macro2::Span::call_site, |s| s.ident.span());
        if path.is_ident("link") {
            self.report(span, "`#[link(...)]` attribute".to_string());
        } else if path.is_ident("cfg_attr") {
            if let syn::Meta::List(list) = &attribute.meta {
                if mentions_link(list.tokens.clone()) {
                    self.report(span, "`#[cfg_attr(..., link(...))]` attribute".to_string());
                }
            }
        }
        syn::visit::visit_attribute(self, attribute);
    }

    fn visit_item_foreign_mod(&mut self, block: &'ast syn::ItemForeignMod) {
        let span = block.abi.extern_token.span;
        for item in &block.items {
            if let syn::ForeignItem::Fn(function) = item {
                let name = function.sig.ident.to_string();
                if is_cuda_name(&name) {
                    self.report(
                        function.sig.ident.span(),
                        format!("foreign block declares CUDA function `{name}`"),
                    );
                }
            }
        }
        if !self.allow_foreign_blocks {
            self.report(
                span,
                "foreign `extern` block (symbols come only from the reviewed loader)".to_string(),
            );
        }
        syn::visit::visit_item_foreign_mod(self, block);
    }
}

/// A build script must not tell cargo to link or where to search.
pub fn scan_build_script(path: &str, text: &str) -> Vec<String> {
    ["rustc-link-lib", "rustc-link-search", "rustc-link-arg"]
        .iter()
        .filter(|instruction| text.contains(*instruction))
        .map(|instruction| format!("{path}: build script emits `{instruction}`"))
        .collect()
}

/// No package may declare `links` (which announces a native library).
pub fn scan_manifest(path: &str, text: &str) -> Vec<String> {
    let mut table = String::new();
    let mut problems = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            table = header.trim_end_matches(']').trim().to_string();
            continue;
        }
        let key = line
            .split('=')
            .next()
            .unwrap_or("")
            .trim()
            .trim_matches('"');
        if line.contains('=') && (key == "links" || key == "package.links") {
            problems.push(format!("{path}:{}: `links` key in [{table}]", number + 1));
        }
    }
    problems
}

/// Builds the runtime as a cdylib and checks its dynamic section.
pub fn check_runtime_cdylib() -> Result<()> {
    if !cfg!(target_os = "linux") {
        return Err("the runtime cdylib check reads ELF files and runs on Linux only".into());
    }
    let root = repo_root();
    let scratch = ScratchDir::new("nolink-cdylib")?;
    let crate_dir = scratch.path().join("rextio-cuda-runtime");
    copy_tree(&root.join("runtime"), &crate_dir)?;
    let manifest_path = crate_dir.join("Cargo.toml");
    let manifest = std::fs::read_to_string(&manifest_path)
        .map_err(|error| format!("runtime/Cargo.toml: {error}"))?;
    std::fs::write(&manifest_path, with_cdylib(&manifest)?)
        .map_err(|error| format!("{}: {error}", manifest_path.display()))?;
    let build_dir = target_dir().join("nolink-cdylib");
    run(Command::new("cargo")
        .current_dir(&crate_dir)
        .env("CARGO_TARGET_DIR", &build_dir)
        .args(["build", "--offline", "--lib", "--manifest-path"])
        .arg(&manifest_path))?;
    let library = build_dir.join("debug").join("librextio_cuda_runtime.so");
    check_dynamic_section(&library)
}

/// The runtime manifest with `crate-type = ["cdylib", "rlib"]` in `[lib]`.
fn with_cdylib(manifest: &str) -> Result<String> {
    if manifest.contains("crate-type") {
        return Err("runtime/Cargo.toml already sets crate-type; update the cdylib check".into());
    }
    let crate_type = "crate-type = [\"cdylib\", \"rlib\"]";
    if manifest.lines().any(|line| line.trim() == "[lib]") {
        Ok(manifest.replacen("[lib]", &format!("[lib]\n{crate_type}"), 1))
    } else {
        Ok(format!("{manifest}\n[lib]\n{crate_type}\n"))
    }
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|error| format!("{}: {error}", to.display()))?;
    let entries =
        std::fs::read_dir(from).map_err(|error| format!("{}: {error}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|error| format!("{}: {error}", from.display()))?;
        let name = entry.file_name();
        if name == "target" {
            continue;
        }
        let kind = entry
            .file_type()
            .map_err(|error| format!("{}: {error}", entry.path().display()))?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &to.join(&name))?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(&name))
                .map_err(|error| format!("{}: {error}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Fails when the ELF/PE at `path` names libcuda or nvcuda as a dependency.
pub fn check_dynamic_section(path: &Path) -> Result<()> {
    let needed = needed_libraries(path)?;
    let shown = path.display();
    let cuda: Vec<&String> = needed
        .iter()
        .filter(|name| name.to_ascii_lowercase().contains("cuda"))
        .collect();
    if cuda.is_empty() {
        println!("nolink: {shown} needs only {needed:?}");
        Ok(())
    } else {
        Err(format!(
            "{shown} links to a CUDA library: DT_NEEDED {cuda:?} (all: {needed:?})"
        ))
    }
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;

/// The `DT_NEEDED` entries of a little-endian ELF64 file.
pub fn needed_libraries(path: &Path) -> Result<Vec<String>> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|error| format!("{shown}: cannot read: {error}"))?;
    parse_needed(&bytes).map_err(|error| format!("{shown}: {error}"))
}

fn parse_needed(bytes: &[u8]) -> std::result::Result<Vec<String>, String> {
    if bytes.starts_with(b"MZ") {
        return Err("not an ELF file (a PE image); the dynamic check reads ELF only".into());
    }
    if !bytes.starts_with(b"\x7fELF") {
        return Err("not an ELF file".into());
    }
    if bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Err("only little-endian ELF64 is supported".into());
    }
    let read = |offset: usize, width: usize| -> std::result::Result<u64, String> {
        let slice = offset
            .checked_add(width)
            .and_then(|end| bytes.get(offset..end))
            .ok_or_else(|| format!("truncated ELF (read at {offset})"))?;
        let mut value = 0u64;
        for (shift, byte) in slice.iter().enumerate() {
            value |= u64::from(*byte) << (8 * shift);
        }
        Ok(value)
    };
    let to_usize =
        |value: u64| usize::try_from(value).map_err(|_| "ELF offset too large".to_string());
    let program_headers = to_usize(read(0x20, 8)?)?;
    let entry_size = to_usize(read(0x36, 2)?)?;
    let count = to_usize(read(0x38, 2)?)?;
    let mut loads = Vec::new();
    let mut dynamic = None;
    for index in 0..count {
        let header = program_headers + index * entry_size;
        let kind = read(header, 4)? as u32;
        let offset = read(header + 0x08, 8)?;
        let vaddr = read(header + 0x10, 8)?;
        let file_size = read(header + 0x20, 8)?;
        match kind {
            PT_LOAD => loads.push((vaddr, offset, file_size)),
            PT_DYNAMIC => dynamic = Some((offset, file_size)),
            _ => {}
        }
    }
    let Some((dynamic_offset, dynamic_size)) = dynamic else {
        return Ok(Vec::new()); // statically linked: needs nothing
    };
    let mut needed_offsets = Vec::new();
    let mut string_table = None;
    let mut entry = to_usize(dynamic_offset)?;
    let end = to_usize(dynamic_offset.saturating_add(dynamic_size))?;
    while entry + 16 <= end {
        let (tag, value) = (read(entry, 8)?, read(entry + 8, 8)?);
        match tag {
            DT_NULL => break,
            DT_NEEDED => needed_offsets.push(value),
            DT_STRTAB => string_table = Some(value),
            _ => {}
        }
        entry += 16;
    }
    if needed_offsets.is_empty() {
        return Ok(Vec::new());
    }
    let address = string_table.ok_or("DT_NEEDED without DT_STRTAB")?;
    let table = loads
        .iter()
        .find(|(vaddr, _, size)| (*vaddr..vaddr.saturating_add(*size)).contains(&address))
        .map(|(vaddr, offset, _)| address - vaddr + offset)
        .ok_or("DT_STRTAB is outside every loaded segment")?;
    needed_offsets
        .into_iter()
        .map(|offset| {
            let start = to_usize(table.saturating_add(offset))?;
            let rest = bytes
                .get(start..)
                .ok_or("DT_NEEDED name outside the file")?;
            let length = rest
                .iter()
                .position(|&byte| byte == 0)
                .ok_or("unterminated DT_NEEDED name")?;
            Ok(String::from_utf8_lossy(&rest[..length]).into_owned())
        })
        .collect()
}

#[cfg(test)]
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
            ["Cargo.toml:3: `links` key in [package]"]
        );
        assert!(scan_manifest("Cargo.toml", "[package]\nname = \"links\"\n").is_empty());
    }

    #[test]
    fn the_cdylib_manifest_gets_a_crate_type() {
        let patched =
            with_cdylib("[package]\nname = \"x\"\n\n[lib]\npath = \"src/lib.rs\"\n").unwrap();
        assert!(patched.contains("[lib]\ncrate-type = [\"cdylib\", \"rlib\"]\npath"));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn dynamic_section_of_a_real_binary_is_read() {
        // This test binary is a real dynamically linked ELF that needs libc.
        let exe = std::env::current_exe().unwrap();
        let needed = needed_libraries(&exe).unwrap();
        assert!(
            needed.iter().any(|name| name.starts_with("libc.so")),
            "{needed:?}"
        );
        check_dynamic_section(&exe).unwrap();
    }

    #[test]
    fn the_workspace_and_the_runtime_tarball_hold_no_link() {
        scan_sources().unwrap();
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_runtime_built_as_a_cdylib_needs_no_cuda() {
        check_runtime_cdylib().unwrap();
    }

    #[test]
    fn non_elf_files_are_refused_clearly() {
        assert!(parse_needed(b"MZ\x90\x00")
            .unwrap_err()
            .contains("PE image"));
        assert!(parse_needed(b"#!/bin/sh\n")
            .unwrap_err()
            .contains("not an ELF file"));
        assert!(parse_needed(b"\x7fELF\x02\x01")
            .unwrap_err()
            .contains("truncated"));
    }
}

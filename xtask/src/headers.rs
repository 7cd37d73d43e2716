//! The ABI check against NVIDIA's own headers (`cargo xtask test` step).
//!
//! For each header set of the symbol list: the pinned PyPI wheel is
//! installed by uv into `target/` (once; uv checks its SHA-256), `cuda.h`
//! and `cudaTypedefs.h` are taken from it, and `generated/driver-abi-check.c`
//! and `generated/cuda-results-check.c` are compiled with `-Werror`; each
//! error is named by the fact its line of the check states. Where the list
//! says a header set does not declare an export, a compile that references
//! it must fail. Finally a deliberately wrong copy of the list must fail,
//! naming the symbol and the parameter.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cuda_header::{param_type, prototypes};
use crate::generate::abi_check::{self, expect_undeclared_macro, header_set_macro};
use crate::generate::inputs::DRIVER_SYMBOLS_PATH;
use crate::generate::results::{CUDA_RESULTS_PATH, RESULTS_CHECK_PATH};
use crate::generate::symbols::{CType, HeaderSet, Symbol, SymbolList};
use crate::paths::{repo_root, target_dir};
use crate::process::run;
use crate::{python_env, Result};

const HEADERS: [&str; 2] = ["cuda.h", "cudaTypedefs.h"];

fn io<T>(path: &Path, outcome: std::io::Result<T>) -> Result<T> {
    outcome.map_err(|error| format!("{}: {error}", path.display()))
}

pub fn check() -> Result<()> {
    let root = repo_root();
    let symbols = SymbolList::parse(&io(
        Path::new(DRIVER_SYMBOLS_PATH),
        std::fs::read(root.join(DRIVER_SYMBOLS_PATH)),
    )?)?;
    let (check_file, results_file) = (
        root.join(abi_check::ABI_CHECK_PATH),
        root.join(RESULTS_CHECK_PATH),
    );
    let scratch = target_dir().join("abi-check");
    io(&scratch, std::fs::create_dir_all(&scratch))?;
    for set in &symbols.header_sets {
        let include = fetch_headers(set)?;
        let typedefs_path = include.join("cudaTypedefs.h");
        let typedefs = io(&typedefs_path, std::fs::read_to_string(&typedefs_path))?;
        compile(&include, set, &check_file, None)
            .map_err(|errors| diagnose(&symbols, set, &typedefs, &errors))?;
        // Every CUresult name refusals quote has its value in this header set.
        compile(&include, set, &results_file, None).map_err(|errors| {
            let (package, version) = (&set.package, &set.version);
            format!(
                "{CUDA_RESULTS_PATH} does not match {package} {version}:\n  {}",
                errors.join("\n  ")
            )
        })?;
        for symbol in &symbols.symbols {
            if symbol.undeclared_in.contains_key(&set.name) {
                expect_undeclared(&include, set, &check_file, symbol)?;
            }
        }
        println!(
            "abi check: {} symbols, {} types, {} constants match {} {} headers",
            symbols.symbols.len(),
            symbols.types.len(),
            symbols.constants.len(),
            set.package,
            set.version
        );
        wrong_copy_is_refused(&symbols, set, &include, &typedefs, &scratch)?;
    }
    Ok(())
}

/// The include directory of `set`'s wheel, installed once by uv (which
/// checks the pinned SHA-256) into `target/nvidia-headers/<package>-<version>/`.
pub fn fetch_headers(set: &HeaderSet) -> Result<PathBuf> {
    // A copy of the repository (symbol-proof) shares this repository's cache.
    let cache = std::env::var_os("XTASK_NVIDIA_HEADERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("nvidia-headers"));
    let unpacked = cache.join(format!("{}-{}", set.package, set.version));
    let include = unpacked.join(&set.include_dir);
    let present = || HEADERS.iter().all(|header| include.join(header).is_file());
    if present() {
        return Ok(include);
    }
    io(&cache, std::fs::create_dir_all(&cache))?;
    let requirement = cache.join(format!("{}-{}.txt", set.package, set.version));
    let pin = format!(
        "{}=={} --hash=sha256:{}\n",
        set.package, set.version, set.wheel_sha256
    );
    io(&requirement, std::fs::write(&requirement, pin))?;
    // The pinned wheel is the manylinux x86_64 one, whatever this host is.
    run(python_env::uv()?
        .args(["pip", "install", "--quiet", "--no-deps", "--require-hashes"])
        .args([
            "--python-platform",
            "x86_64-manylinux2014",
            "--python-version",
            "3.11",
        ])
        .arg("--target")
        .arg(&unpacked)
        .arg("--requirement")
        .arg(&requirement))
    .map_err(|why| {
        format!(
            "header set {}: the ABI check needs its wheel: {why}",
            set.name
        )
    })?;
    if present() {
        return Ok(include);
    }
    let (name, package, version) = (&set.name, &set.package, &set.version);
    let (headers, dir) = (HEADERS.join(" and "), &set.include_dir);
    Err(format!(
        "header set {name}: {package}=={version} holds no {headers} under {dir}"
    ))
}

/// Compiles `file` against `include`. On failure: each error, as
/// `FACT: MESSAGE` where it is on a line of `file` (FACT: what that line
/// states), else as the compiler wrote it.
fn compile(
    include: &Path,
    set: &HeaderSet,
    file: &Path,
    define: Option<&str>,
) -> std::result::Result<(), Vec<String>> {
    let compiler = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let output = Command::new(compiler)
        .args([
            "-std=c11",
            "-fsyntax-only",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-isystem",
        ])
        .arg(include)
        .arg(format!("-D{}", header_set_macro(&set.name)))
        .args(define.map(|define| format!("-D{define}")))
        .arg(file)
        .output()
        .map_err(|error| vec![format!("cannot run the C compiler (cc): {error}")])?;
    if output.status.success() {
        return Ok(());
    }
    let source = std::fs::read_to_string(file).unwrap_or_default();
    let lines: Vec<&str> = source.lines().collect();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let prefix = format!("{}:", file.display());
    let named = |place: &str, message: &str| {
        let number: usize = place
            .strip_prefix(&prefix)?
            .split(':')
            .next()?
            .parse()
            .ok()?;
        Some(format!(
            "{}: {message}",
            fact(lines.get(number.checked_sub(1)?)?)
        ))
    };
    let errors: Vec<String> = stderr
        .lines()
        .filter_map(|line| {
            line.split_once(": error: ")
                .map(|(place, message)| named(place, message).unwrap_or_else(|| line.to_string()))
        })
        .collect();
    Err(if errors.is_empty() {
        vec![stderr.trim().to_string()]
    } else {
        errors
    })
}

/// What a line of a generated check states: its `_Static_assert`'s message,
/// or `EXPORT CHECK` for the `rextio_CHECK_EXPORT` it declares last.
fn fact(line: &str) -> String {
    if let Some((_, message)) = line
        .strip_suffix("\");")
        .and_then(|rest| rest.rsplit_once('"'))
    {
        return message.to_string();
    }
    let (_, declared) = line.rsplit_once("rextio_").unwrap_or_default();
    let end = declared
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(declared.len());
    match declared[..end].split_once('_') {
        Some((check, export)) => format!("{export} {check}"),
        None => line.trim().to_string(),
    }
}

/// The compiler's errors, each named by its fact, and for each symbol named
/// the parameters whose type differs from the header's `PFN_` typedef.
fn diagnose(symbols: &SymbolList, set: &HeaderSet, typedefs: &str, errors: &[String]) -> String {
    let mut findings = errors.to_vec();
    for symbol in &symbols.symbols {
        if errors
            .iter()
            .any(|error| error.starts_with(&format!("{} ", symbol.export)))
        {
            findings.extend(parameter_differences(symbol, typedefs));
        }
    }
    let (package, version, name) = (&set.package, &set.version, &set.name);
    format!(
        "the symbol list does not match {package} {version} (header set {name}):\n  {}",
        findings.join("\n  ")
    )
}

/// Each parameter of `symbol` whose type differs from the header's
/// `PFN_<api>_v<abi_version>` typedef, both in the list's spelling.
fn parameter_differences(symbol: &Symbol, typedefs: &str) -> Vec<String> {
    let (export, pfn) = (
        &symbol.export,
        format!("PFN_{}_v{}", symbol.api, symbol.abi_version),
    );
    let found = prototypes(typedefs, "(CUDAAPI *")
        .into_iter()
        .find(|(name, _)| *name == pfn);
    let Some((_, header)) = found else {
        return vec![format!(
            "{export}: the headers have no {pfn} typedef (abi_version)"
        )];
    };
    if header.len() != symbol.params.len() {
        let (theirs, ours) = (header.len(), symbol.params.len());
        return vec![format!(
            "{export}: the header's {pfn} takes {theirs} parameters, the list {ours}"
        )];
    }
    let pairs = symbol.params.iter().zip(header);
    pairs
        .filter_map(|(param, header)| {
            let listed = param_type(&param.c_type.c_spelling()).c_spelling();
            let header = param_type(&header).c_spelling();
            let name = &param.name;
            (listed != header).then(|| format!("{export} parameter `{name}`: the header has `{header}`, the list says `{listed}`"))
        })
        .collect()
}

fn expect_undeclared(include: &Path, set: &HeaderSet, file: &Path, symbol: &Symbol) -> Result<()> {
    let (export, name) = (&symbol.export, &set.name);
    match compile(include, set, file, Some(&expect_undeclared_macro(export))) {
        Ok(()) => Err(format!(
            "{DRIVER_SYMBOLS_PATH}: {export} says header set {name} does not declare it, but {} {} \
             does: remove `undeclared_in.{name}`",
            set.package, set.version
        )),
        Err(errors)
            if errors
                .iter()
                .any(|error| error.starts_with(&format!("{export} undeclared: "))) =>
        {
            println!(
                "abi check: {} {} does not declare {export}, as the list records",
                set.package, set.version
            );
            Ok(())
        }
        Err(errors) => Err(format!(
            "the undeclared check of {export} against {name} failed for another reason:\n  {}",
            errors.join("\n  ")
        )),
    }
}

/// The check must catch a mismatch and name it: a copy of the list whose
/// first `size_t` parameter (`cuMemAlloc_v2`'s bytes) is `unsigned int` (the
/// pre-3.2 ABI) must fail, naming the symbol and the parameter.
fn wrong_copy_is_refused(
    symbols: &SymbolList,
    set: &HeaderSet,
    include: &Path,
    typedefs: &str,
    scratch: &Path,
) -> Result<()> {
    let mut wrong = symbols.clone();
    let size_t = CType {
        base: "size_t".into(),
        ..CType::default()
    };
    let changed = wrong.symbols.iter_mut().find_map(|symbol| {
        let param = symbol
            .params
            .iter_mut()
            .find(|param| param.c_type == size_t)?;
        param.c_type.base = "unsigned int".into();
        Some((symbol.export.clone(), param.name.clone()))
    });
    let Some((symbol, param)) = changed else {
        return Err("the wrong-copy self-test needs a symbol with a size_t parameter".into());
    };
    let file = scratch.join(format!("wrong-{}.c", set.name));
    io(&file, std::fs::write(&file, abi_check::render(&wrong)))?;
    let Err(errors) = compile(include, set, &file, None) else {
        let name = &set.name;
        return Err(format!(
            "self-test: a list whose {symbol} takes `unsigned int {param}` compiled against {name}"
        ));
    };
    let message = diagnose(&wrong, set, typedefs, &errors);
    let expected = format!("{symbol} parameter `{param}`: the header has `size_t`");
    if message.contains(&format!("{symbol} prototype: ")) && message.contains(&expected) {
        println!("abi check: a wrong copy of the list is refused: {expected}, the list says `unsigned int`");
        Ok(())
    } else {
        Err(format!("self-test: the refusal of a wrong copy does not name {symbol} and `{param}`:\n{message}"))
    }
}

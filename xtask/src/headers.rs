//! The ABI check against NVIDIA's own headers (`cargo xtask test` step).
//!
//! For each header set of the symbol list: the pinned PyPI wheel is
//! installed by uv into `target/` (once; uv checks its SHA-256), `cuda.h`
//! and `cudaTypedefs.h` are taken from it, and `generated/driver-abi-check.c` is compiled with `-Werror`.
//! Where the list says a header set does not declare an export, a compile
//! that references it must fail. Finally a deliberately wrong copy of the
//! list must fail, naming the symbol and the parameter.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::generate::abi_check::{self, expect_undeclared_macro, header_set_macro};
use crate::generate::inputs::DRIVER_SYMBOLS_PATH;
use crate::generate::results;
use crate::generate::symbols::{HeaderSet, Symbol, SymbolList};
use crate::paths::{repo_root, target_dir};
use crate::process::run;
use crate::{python_env, Result};

const HEADERS: [&str; 2] = ["cuda.h", "cudaTypedefs.h"];

pub fn check() -> Result<()> {
    let root = repo_root();
    let list_bytes = std::fs::read(root.join(DRIVER_SYMBOLS_PATH))
        .map_err(|error| format!("{DRIVER_SYMBOLS_PATH}: {error}"))?;
    let symbols = SymbolList::parse(&list_bytes)?;
    let check_file = root.join(abi_check::ABI_CHECK_PATH);
    let scratch = target_dir().join("abi-check");
    std::fs::create_dir_all(&scratch).map_err(|error| format!("{}: {error}", scratch.display()))?;
    for set in &symbols.header_sets {
        let include = fetch_headers(set)?;
        compile(&include, set, &check_file, None)
            .map_err(|output| diagnose(&symbols, set, &include, &output))?;
        // Every CUresult name refusals quote has its value in this header set.
        compile(&include, set, &root.join(results::RESULTS_CHECK_PATH), None).map_err(
            |output| {
                format!(
                    "{} does not match {} {}:\n{output}",
                    results::CUDA_RESULTS_PATH,
                    set.package,
                    set.version
                )
            },
        )?;
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
        wrong_copy_is_refused(&symbols, set, &include, &scratch)?;
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
    std::fs::create_dir_all(&cache).map_err(|error| format!("{}: {error}", cache.display()))?;
    let requirement = cache.join(format!("{}-{}.txt", set.package, set.version));
    let pin = format!(
        "{}=={} --hash=sha256:{}\n",
        set.package, set.version, set.wheel_sha256
    );
    std::fs::write(&requirement, pin)
        .map_err(|error| format!("{}: {error}", requirement.display()))?;
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
        Ok(include)
    } else {
        Err(format!(
            "header set {}: {}=={} holds no {} under {}",
            set.name,
            set.package,
            set.version,
            HEADERS.join(" and "),
            set.include_dir
        ))
    }
}

/// Compiles `file` against `include`; `Err(compiler output)` on failure.
fn compile(
    include: &Path,
    set: &HeaderSet,
    file: &Path,
    extra_define: Option<&str>,
) -> std::result::Result<(), String> {
    let compiler = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut command = Command::new(compiler);
    command
        .args([
            "-std=c11",
            "-fsyntax-only",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-isystem",
        ])
        .arg(include)
        .arg(format!("-D{}", header_set_macro(&set.name)));
    if let Some(define) = extra_define {
        command.arg(format!("-D{define}"));
    }
    let output = command
        .arg(file)
        .output()
        .map_err(|error| format!("cannot run the C compiler (cc): {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// The compiler's error lines (each starts with the check's `#line` name:
/// the symbol and what failed), and for each failing symbol the parameters
/// whose type differs from the header's `PFN_` typedef.
fn diagnose(symbols: &SymbolList, set: &HeaderSet, include: &Path, output: &str) -> String {
    let errors: Vec<&str> = output
        .lines()
        .filter(|line| line.contains("error:"))
        .collect();
    let typedefs = std::fs::read_to_string(include.join("cudaTypedefs.h")).unwrap_or_default();
    let mut findings = Vec::new();
    for symbol in &symbols.symbols {
        let named = errors
            .iter()
            .any(|line| line.starts_with(&format!("{} ", symbol.export)));
        if named {
            findings.extend(parameter_differences(symbol, &typedefs));
        }
    }
    format!(
        "the symbol list does not match {} {} (header set {}):\n  {}{}",
        set.package,
        set.version,
        set.name,
        if errors.is_empty() {
            output.trim().to_string()
        } else {
            errors.join("\n  ")
        },
        findings
            .iter()
            .map(|finding| format!("\n  {finding}"))
            .collect::<String>()
    )
}

/// Each parameter of `symbol` whose type differs from the header's
/// `PFN_<api>_v<abi_version>` typedef (typedef version suffixes such as
/// `CUdevice_v1` compare equal to their plain names).
pub fn parameter_differences(symbol: &Symbol, typedefs: &str) -> Vec<String> {
    let typedef = format!("*PFN_{}_v{})(", symbol.api, symbol.abi_version);
    let Some(start) = typedefs.find(&typedef) else {
        return vec![format!(
            "{}: the headers have no PFN_{}_v{} typedef (abi_version)",
            symbol.export, symbol.api, symbol.abi_version
        )];
    };
    let rest = &typedefs[start + typedef.len()..];
    let Some(end) = rest.find(");") else {
        return Vec::new();
    };
    let header_params: Vec<String> = rest[..end]
        .split(',')
        .map(|param| normalize(strip_name(param.trim())))
        .filter(|param| param != "void")
        .collect();
    if header_params.len() != symbol.params.len() {
        return vec![format!(
            "{}: the header's PFN_{}_v{} takes {} parameters, the list {}",
            symbol.export,
            symbol.api,
            symbol.abi_version,
            header_params.len(),
            symbol.params.len()
        )];
    }
    symbol
        .params
        .iter()
        .zip(header_params)
        .filter_map(|(param, header)| {
            let listed = normalize(&param.c_type.c_spelling());
            (listed != header).then(|| {
                format!(
                    "{} parameter `{}`: the header has `{header}`, the list says `{listed}`",
                    symbol.export, param.name
                )
            })
        })
        .collect()
}

/// `CUcontext *pctx` -> `CUcontext *`.
fn strip_name(param: &str) -> &str {
    let name_start = param
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |index| index + 1);
    if name_start == 0 {
        param
    } else {
        &param[..name_start]
    }
}

/// One spelling per type: single spaces, `*` attached, `_vN` typedef suffixes dropped.
fn normalize(text: &str) -> String {
    let spaced = text.replace('*', " * ");
    let words: Vec<String> = spaced
        .split_whitespace()
        .map(|word| match word.rfind("_v") {
            Some(index)
                if word.starts_with("CU")
                    && word[index + 2..].chars().all(|c| c.is_ascii_digit())
                    && index + 2 < word.len() =>
            {
                word[..index].to_string()
            }
            _ => word.to_string(),
        })
        .collect();
    words.join(" ").replace(" *", "*").replace("* ", "*")
}

fn expect_undeclared(include: &Path, set: &HeaderSet, file: &Path, symbol: &Symbol) -> Result<()> {
    match compile(
        include,
        set,
        file,
        Some(&expect_undeclared_macro(&symbol.export)),
    ) {
        Ok(()) => Err(format!(
            "{DRIVER_SYMBOLS_PATH}: {} says header set {} does not declare it, but {} {} does: \
             remove `undeclared_in.{}`",
            symbol.export, set.name, set.package, set.version, set.name
        )),
        Err(output) if output.contains(&format!("{} expected undeclared", symbol.export)) => {
            println!(
                "abi check: {} {} does not declare {}, as the list records",
                set.package, set.version, symbol.export
            );
            Ok(())
        }
        Err(output) => Err(format!(
            "the undeclared check of {} against {} failed for another reason:\n{output}",
            symbol.export, set.name
        )),
    }
}

/// The check must catch a mismatch and name it: a copy of the list whose
/// `cuMemAlloc_v2` takes `unsigned int` bytes (the pre-3.2 ABI) must fail,
/// naming the symbol and the parameter.
fn wrong_copy_is_refused(
    symbols: &SymbolList,
    set: &HeaderSet,
    include: &Path,
    scratch: &Path,
) -> Result<()> {
    let mut wrong = symbols.clone();
    let Some((symbol, param)) = wrong.symbols.iter_mut().find_map(|symbol| {
        let export = symbol.export.clone();
        let param = symbol.params.iter_mut().find(|param| {
            param.c_type
                == crate::generate::symbols::CType::Scalar(crate::generate::symbols::Scalar::SizeT)
        })?;
        param.c_type =
            crate::generate::symbols::CType::Scalar(crate::generate::symbols::Scalar::UnsignedInt);
        Some((export, param.name.clone()))
    }) else {
        return Err("the wrong-copy self-test needs a symbol with a size_t parameter".into());
    };
    let file = scratch.join(format!("wrong-{}.c", set.name));
    std::fs::write(&file, abi_check::render(&wrong)?)
        .map_err(|error| format!("{}: {error}", file.display()))?;
    let output = match compile(include, set, &file, None) {
        Ok(()) => {
            return Err(format!(
                "self-test: a list whose {symbol} takes `unsigned int {param}` compiled against {}",
                set.name
            ))
        }
        Err(output) => output,
    };
    let message = diagnose(&wrong, set, include, &output);
    let expected = format!("{symbol} parameter `{param}`: the header has `size_t`");
    if message.contains(&format!("{symbol} prototype")) && message.contains(&expected) {
        println!("abi check: a wrong copy of the list is refused: {expected}, the list says `unsigned int`");
        Ok(())
    } else {
        Err(format!(
            "self-test: the refusal of a wrong copy does not name {symbol} and `{param}`:\n{message}"
        ))
    }
}

//! The ABI check against NVIDIA's own headers (`cargo xtask test` step).
//!
//! For each header set of the symbol list: its pinned PyPI wheel is
//! installed by uv into `target/` (once; uv checks its SHA-256), and
//! `generated/driver-abi-check.c` and `generated/cuda-results-check.c` are
//! compiled against its `cuda.h` and `cudaTypedefs.h` with `-Werror`, each
//! error named by the fact its line states. Where the list says a header set
//! does not declare an export, a compile that references it must fail.
//! Finally a deliberately wrong copy of the list must fail, naming the
//! symbol and the parameter.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cuda_header::{param_type, prototypes};
use crate::generate::abi_check::{self, expect_undeclared_macro, header_set_macro};
use crate::generate::inputs::DRIVER_SYMBOLS_PATH;
use crate::generate::results::RESULTS_CHECK_PATH;
use crate::generate::symbols::{HeaderSet, Symbol, SymbolList};
use crate::paths::{repo_root, target_dir};
use crate::process::run;
use crate::{python_env, Result};

const HEADERS: [&str; 2] = ["cuda.h", "cudaTypedefs.h"];

fn io<T>(path: &Path, outcome: std::io::Result<T>) -> Result<T> {
    outcome.map_err(|error| format!("{}: {error}", path.display()))
}

pub fn check() -> Result<()> {
    let root = repo_root();
    let list = root.join(DRIVER_SYMBOLS_PATH);
    let symbols = SymbolList::parse(&io(&list, std::fs::read(&list))?)?;
    let check_file = root.join(abi_check::ABI_CHECK_PATH);
    for set in symbols.header_sets.values() {
        let include = fetch_headers(set)?;
        let typedefs = include.join("cudaTypedefs.h");
        let typedefs = io(&typedefs, std::fs::read_to_string(&typedefs))?;
        let headers = Headers {
            set,
            include,
            typedefs,
        };
        // The list, then every CUresult name refusals quote, has its value here.
        for file in [check_file.clone(), root.join(RESULTS_CHECK_PATH)] {
            let errors = headers.compile(&file, None)?;
            if !errors.is_empty() {
                return Err(headers.diagnose(&symbols, &errors));
            }
        }
        for symbol in &symbols.symbols {
            if symbol.undeclared_in.contains_key(&set.name) {
                headers.expect_undeclared(&check_file, symbol)?;
            }
        }
        let (types, constants) = (symbols.types.len(), symbols.constants.len());
        let listed = format!("{} symbols, {types} types", symbols.symbols.len());
        println!(
            "abi check: {listed}, {constants} constants match {} headers",
            headers.label()
        );
        headers.wrong_copy_is_refused(&symbols)?;
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
    let (name, package, version) = (&set.name, &set.package, &set.version);
    let unpacked = cache.join(format!("{package}-{version}"));
    let include = unpacked.join(&set.include_dir);
    let present = || HEADERS.iter().all(|header| include.join(header).is_file());
    if !present() {
        io(&cache, std::fs::create_dir_all(&cache))?;
        let requirement = cache.join(format!("{package}-{version}.txt"));
        let pin = format!("{package}=={version} --hash=sha256:{}\n", set.wheel_sha256);
        io(&requirement, std::fs::write(&requirement, pin))?;
        let mut uv = python_env::uv()?;
        let options = "pip install --quiet --no-deps --require-hashes --python-version 3.11";
        // The pinned wheel is the manylinux x86_64 one, whatever this host is.
        uv.args(options.split(' '))
            .args(["--python-platform", "x86_64-manylinux2014", "--target"]);
        uv.arg(&unpacked).arg("--requirement").arg(&requirement);
        let needs = |why| format!("header set {name}: the ABI check needs its wheel: {why}");
        run(&mut uv).map_err(needs)?;
    }
    let (headers, dir) = (HEADERS.join(" and "), &set.include_dir);
    let missing = format!("header set {name}: {package}=={version} holds no {headers} under {dir}");
    present().then_some(include).ok_or(missing)
}

/// One header set, fetched: its include directory and its `cudaTypedefs.h`.
struct Headers<'a> {
    set: &'a HeaderSet,
    include: PathBuf,
    typedefs: String,
}

impl Headers<'_> {
    /// `PACKAGE VERSION`.
    fn label(&self) -> String {
        format!("{} {}", self.set.package, self.set.version)
    }

    /// Compiles `file` against the headers, defining `define`. Returns each
    /// error: `FACT: MESSAGE` where it is on a line of `file` (FACT: what
    /// that line states), else as the compiler wrote it.
    fn compile(&self, file: &Path, define: Option<&str>) -> Result<Vec<String>> {
        let compiler = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
        let output = Command::new(compiler)
            .args("-std=c11 -fsyntax-only -Wall -Wextra -Werror -isystem".split(' '))
            .arg(&self.include)
            .arg(format!("-D{}", header_set_macro(&self.set.name)))
            .args(define.map(|define| format!("-D{define}")))
            .arg(file)
            .output()
            .map_err(|error| format!("cannot run the C compiler (cc): {error}"))?;
        let source = io(file, std::fs::read_to_string(file))?;
        let prefix = format!("{}:", file.display());
        let named = |line: &str| {
            let (place, message) = line.split_once(": error: ")?;
            let (number, _) = place.strip_prefix(&prefix)?.split_once(':')?;
            let line = source
                .lines()
                .nth(number.parse::<usize>().ok()?.checked_sub(1)?)?;
            Some(format!("{}: {message}", fact(line)))
        };
        let stderr = String::from_utf8_lossy(&output.stderr);
        let errors = stderr.lines().filter(|line| line.contains(": error: "));
        let mut errors: Vec<String> = errors
            .map(|line| named(line).unwrap_or(line.into()))
            .collect();
        if errors.is_empty() && !output.status.success() {
            errors.push(stderr.trim().to_string());
        }
        Ok(errors)
    }

    /// The compiler's errors, each named by its fact, and for each symbol
    /// named, the parameters whose type differs from the header's
    /// `PFN_<api>_v<abi_version>` typedef, both in the list's spelling.
    fn diagnose(&self, symbols: &SymbolList, errors: &[String]) -> String {
        let mut findings = errors.to_vec();
        let typedefs = prototypes(&self.typedefs, "(CUDAAPI *");
        for symbol in &symbols.symbols {
            let export = &symbol.export;
            if !errors
                .iter()
                .any(|error| error.starts_with(&format!("{export} ")))
            {
                continue;
            }
            let pfn = format!("PFN_{}_v{}", symbol.api, symbol.abi_version);
            let header = typedefs.iter().find(|(name, _)| *name == pfn);
            let Some((_, header)) = header else {
                findings.push(format!(
                    "{export}: the headers have no {pfn} typedef (abi_version)"
                ));
                continue;
            };
            let (theirs, ours) = (header.len(), symbol.params.len());
            if theirs != ours {
                let says = format!("the header's {pfn} takes {theirs} parameters, not {ours}");
                findings.push(format!("{export}: {says}"));
                continue;
            }
            for (param, header) in symbol.params.iter().zip(header) {
                let (listed, header) = (param.c_type.c_spelling(), param_type(header).c_spelling());
                let says = format!("the header has `{header}`, the list says `{listed}`");
                if listed != header {
                    findings.push(format!("{export} parameter `{}`: {says}", param.name));
                }
            }
        }
        let (label, name, findings) = (self.label(), &self.set.name, findings.join("\n  "));
        format!("the lists do not match {label} (header set {name}):\n  {findings}")
    }

    /// Where the list says the headers do not declare `symbol`, a compile
    /// that references it must fail there.
    fn expect_undeclared(&self, file: &Path, symbol: &Symbol) -> Result<()> {
        let (export, name, label) = (&symbol.export, &self.set.name, self.label());
        let errors = self.compile(file, Some(&expect_undeclared_macro(export)))?;
        if errors.is_empty() {
            return Err(format!(
                "{DRIVER_SYMBOLS_PATH}: {export} says header set {name} does not declare it, but \
                 {label} does: remove `undeclared_in.{name}`"
            ));
        }
        let undeclared = format!("{export} undeclared: ");
        if !errors.iter().any(|error| error.starts_with(&undeclared)) {
            let errors = errors.join("\n  ");
            return Err(format!(
                "the undeclared check of {export} against {name}:\n  {errors}"
            ));
        }
        println!("abi check: {label} does not declare {export}, as the list records");
        Ok(())
    }

    /// The check must catch a mismatch and name it: a copy of the list whose
    /// first `size_t` parameter (`cuMemAlloc_v2`'s bytes) is `unsigned int`
    /// (the pre-3.2 ABI) must fail, naming the symbol and the parameter.
    fn wrong_copy_is_refused(&self, symbols: &SymbolList) -> Result<()> {
        let mut wrong = symbols.clone();
        let changed = wrong.symbols.iter_mut().find_map(|symbol| {
            let mut params = symbol.params.iter_mut();
            let param = params.find(|param| param.c_type.c_spelling() == "size_t")?;
            param.c_type.base = "unsigned int".into();
            Some((symbol.export.clone(), param.name.clone()))
        });
        let (symbol, param) = changed.ok_or("the wrong-copy self-test needs a size_t parameter")?;
        let scratch = target_dir().join("abi-check");
        io(&scratch, std::fs::create_dir_all(&scratch))?;
        let file = scratch.join(format!("wrong-{}.c", self.set.name));
        io(&file, std::fs::write(&file, abi_check::render(&wrong)))?;
        let message = self.diagnose(&wrong, &self.compile(&file, None)?);
        let expected = format!("{symbol} parameter `{param}`: the header has `size_t`");
        let named =
            message.contains(&format!("{symbol} prototype: ")) && message.contains(&expected);
        let refusal = format!("the refusal of a list whose {symbol} takes `unsigned int {param}`");
        if !named {
            return Err(format!(
                "self-test: {refusal} does not name them:\n{message}"
            ));
        }
        println!("abi check: {refusal} names them: {expected}, the list says `unsigned int`");
        Ok(())
    }
}

/// What a line of a generated check states: its `_Static_assert`'s message,
/// or `EXPORT CHECK` for the `rextio_CHECK_EXPORT` it declares last.
fn fact(line: &str) -> String {
    let message = line
        .strip_suffix("\");")
        .and_then(|rest| rest.rsplit_once('"'));
    let (_, declared) = line.rsplit_once("rextio_").unwrap_or_default();
    let end = declared.find([' ', ')', ';']).unwrap_or(declared.len());
    match (message, declared[..end].split_once('_')) {
        (Some((_, message)), _) => message.to_string(),
        (None, Some((check, export))) => format!("{export} {check}"),
        (None, None) => line.trim().to_string(),
    }
}

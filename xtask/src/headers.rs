//! The ABI check against NVIDIA's own headers (`cargo xtask test` step),
//! and those headers read as declarations.
//!
//! For each header set of the symbol list, its pinned PyPI wheel is
//! installed by uv into `target/` (once; uv checks its SHA-256), and the
//! generated C checks are compiled against it with `-Werror`, each error
//! named by the fact its line states and each parameter whose type differs
//! from the `PFN_` typedef. The exports the list says a set lacks must be
//! undeclared there; a deliberately wrong copy of the list must fail.
//!
//! For the bench, [`with_full_api`] adds every `CUresult CUDAAPI` function
//! of the 13.x `cuda.h` to the list, named by the export its `#define`
//! selects, with the header's parameter types (stand-in 32-bit enums where
//! the list declares none: the render costs the same), parameters `p0`,
//! `p1`, ... and versions 2000.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::generate::abi_check::{self, EXPECT_UNDECLARED_MACRO, HEADER_SET_MACRO};
use crate::generate::inputs::{Inputs, DRIVER_SYMBOLS_PATH};
use crate::generate::results::RESULTS_CHECK_PATH;
use crate::generate::symbols::{is_word, scalar, CType, HeaderSet, SymbolList, C_WORDS};
use crate::paths::{at, repo_root, target_dir};
use crate::process::run;
use crate::{python_env, Result};

const HEADERS: [&str; 2] = ["cuda.h", "cudaTypedefs.h"];

pub fn check() -> Result<()> {
    let root = repo_root();
    let list = root.join(DRIVER_SYMBOLS_PATH);
    let symbols = SymbolList::parse(&std::fs::read(&list).map_err(at(&list))?)?;
    for set in symbols.header_sets.values() {
        let include = fetch_headers(set)?;
        // The exports the list says these headers lack must be undeclared
        // here: the check references them, and the compile names each.
        let lacking = symbols.symbols.iter();
        let lacking = lacking.filter(|symbol| symbol.undeclared_in.contains_key(&set.name));
        let lacking: Vec<&String> = lacking.map(|symbol| &symbol.export).collect();
        let expect = |export: &&String| format!("{EXPECT_UNDECLARED_MACRO}{export}");
        let defines: Vec<String> = lacking.iter().map(expect).collect();
        let check = root.join(abi_check::ABI_CHECK_PATH);
        let mut errors = compile(set, &include, &check, &defines)?;
        for export in &lacking {
            let count = errors.len();
            let undeclared = format!("{export} undeclared: ");
            errors.retain(|error| !error.starts_with(&undeclared));
            if errors.len() == count {
                let name = &set.name;
                let declared = format!("{export}: declared here; remove `undeclared_in.{name}`");
                errors.push(declared);
            }
        }
        // Then every CUresult name refusals quote has its value here.
        let results = root.join(RESULTS_CHECK_PATH);
        errors.extend(compile(set, &include, &results, &[])?);
        if !errors.is_empty() {
            return Err(diagnose(set, &include, &symbols, &errors));
        }
        let label = format!("{} {}", set.package, set.version);
        let count = symbols.symbols.len();
        let constants = symbols.constants.len();
        println!("abi check: {count} symbols, {constants} constants match {label} headers");
        wrong_copy_is_refused(set, &include, &symbols)?;
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
    let name = &set.name;
    let package = &set.package;
    let version = &set.version;
    let unpacked = cache.join(format!("{package}-{version}"));
    let include = unpacked.join(&set.include_dir);
    let present = || HEADERS.iter().all(|header| include.join(header).is_file());
    if !present() {
        std::fs::create_dir_all(&cache).map_err(at(&cache))?;
        let requirement = cache.join(format!("{package}-{version}.txt"));
        let pin = format!("{package}=={version} --hash=sha256:{}\n", set.wheel_sha256);
        std::fs::write(&requirement, pin).map_err(at(&requirement))?;
        let mut uv = python_env::uv()?;
        let options = "pip install --quiet --no-deps --require-hashes --python-version 3.11";
        // The pinned wheel is the manylinux x86_64 one, whatever this host is.
        uv.args(options.split(' '))
            .args(["--python-platform", "x86_64-manylinux2014", "--target"]);
        uv.arg(&unpacked).arg("--requirement").arg(&requirement);
        let needs = |why| format!("header set {name}: the ABI check needs its wheel: {why}");
        run(&mut uv).map_err(needs)?;
    }
    if !present() {
        let headers = HEADERS.join(" and ");
        let dir = &set.include_dir;
        return Err(format!(
            "header set {name}: {package}=={version} holds no {headers} under {dir}"
        ));
    }
    Ok(include)
}

/// Compiles `file` against the headers in `dir`, defining `defines`.
/// Returns each error: `FACT: MESSAGE` where it is on a line of `file`
/// (FACT: what that line states), else as the compiler wrote it.
fn compile(set: &HeaderSet, dir: &Path, file: &Path, defines: &[String]) -> Result<Vec<String>> {
    let compiler = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let output = Command::new(compiler)
        .args("-std=c11 -fsyntax-only -Wall -Wextra -Werror -isystem".split(' '))
        .arg(dir)
        .arg(format!("-D{HEADER_SET_MACRO}{}", set.name))
        .args(defines.iter().map(|define| format!("-D{define}")))
        .arg(file)
        .output()
        .map_err(|error| format!("cannot run the C compiler (cc): {error}"))?;
    let source = std::fs::read_to_string(file).map_err(at(file))?;
    let prefix = format!("{}:", file.display());
    let named = |line: &str| {
        let (place, message) = line.split_once(": error: ")?;
        let (number, _) = place.strip_prefix(&prefix)?.split_once(':')?;
        let index = number.parse::<usize>().ok()?.checked_sub(1)?;
        Some(format!("{}: {message}", fact(source.lines().nth(index)?)))
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let errors = stderr.lines().filter(|line| line.contains(": error: "));
    let errors = errors.map(|line| named(line).unwrap_or(line.into()));
    let mut errors: Vec<String> = errors.collect();
    if errors.is_empty() && !output.status.success() {
        errors.push(stderr.trim().to_string());
    }
    Ok(errors)
}

/// The compiler's errors, and for each symbol they name, the parameters
/// whose type differs from the header's `PFN_<api>_v<abi_version>`
/// typedef, both in the list's spelling.
fn diagnose(set: &HeaderSet, include: &Path, symbols: &SymbolList, errors: &[String]) -> String {
    let mut findings = errors.to_vec();
    let typedefs = std::fs::read_to_string(include.join("cudaTypedefs.h"));
    // fetch_headers found the file; without it, no parameter is named.
    let typedefs = prototypes(&typedefs.unwrap_or_default(), "(CUDAAPI *");
    let named: BTreeSet<&str> = errors.iter().filter_map(|e| e.split(' ').next()).collect();
    let listed = symbols.symbols.iter();
    for symbol in listed.filter(|symbol| named.contains(symbol.export.as_str())) {
        let export = &symbol.export;
        let pfn = format!("PFN_{}_v{}", symbol.api, symbol.abi_version);
        let header = typedefs.iter().find(|(name, _)| *name == pfn);
        let header = header.map_or(&[][..], |(_, params)| params);
        if header.len() != symbol.params.len() {
            let missing = format!("{export}: no {pfn} with its parameters (abi_version)");
            findings.push(missing);
        }
        for (param, header) in symbol.params.iter().zip(header) {
            let listed = param.c_type.c_spelling();
            let header = param_type(header).c_spelling();
            let says = format!("the header has `{header}`, the list says `{listed}`");
            if listed != header {
                findings.push(format!("{export} parameter `{}`: {says}", param.name));
            }
        }
    }
    let findings = findings.join("\n  ");
    format!(
        "the lists do not match {} {} (header set {}):\n  {findings}",
        set.package, set.version, set.name
    )
}

/// The check must catch a mismatch and name it: a copy of the list whose
/// first `size_t` parameter (`cuMemAlloc_v2`'s bytes) is `unsigned int`
/// (the pre-3.2 ABI) must fail, naming the symbol and the parameter.
fn wrong_copy_is_refused(set: &HeaderSet, include: &Path, symbols: &SymbolList) -> Result<()> {
    let mut wrong = symbols.clone();
    let changed = wrong.symbols.iter_mut().find_map(|symbol| {
        let mut params = symbol.params.iter_mut();
        let param = params.find(|param| param.c_type.c_spelling() == "size_t")?;
        param.c_type.base = "unsigned int".into();
        Some((symbol.export.clone(), param.name.clone()))
    });
    let (symbol, param) = changed.ok_or("the wrong-copy self-test needs a size_t parameter")?;
    let scratch = target_dir().join("abi-check");
    std::fs::create_dir_all(&scratch).map_err(at(&scratch))?;
    let file = scratch.join(format!("wrong-{}.c", set.name));
    std::fs::write(&file, abi_check::render(&wrong)).map_err(at(&file))?;
    let message = diagnose(set, include, &wrong, &compile(set, include, &file, &[])?);
    let expected = format!("{symbol} parameter `{param}`: the header has `size_t`");
    let named = message.contains(&format!("{symbol} prototype: ")) && message.contains(&expected);
    let refusal = format!("the refusal of a list whose {symbol} takes `unsigned int {param}`");
    if !named {
        return Err(format!(
            "self-test: {refusal} does not name them:\n{message}"
        ));
    }
    println!("abi check: {refusal} names them: {expected}, the list says `unsigned int`");
    Ok(())
}

/// What a line of a generated check states: its `_Static_assert`'s message,
/// or `EXPORT CHECK` for the `rextio_CHECK_EXPORT` it declares last.
fn fact(line: &str) -> String {
    let message = line.strip_suffix("\");");
    let message = message.and_then(|rest| rest.rsplit_once('"'));
    let (_, declared) = line.rsplit_once("rextio_").unwrap_or_default();
    let end = declared.find([' ', ')', ';']).unwrap_or(declared.len());
    match (message, declared[..end].split_once('_')) {
        (Some((_, message)), _) => message.to_string(),
        (None, Some((check, export))) => format!("{export} {check}"),
        (None, None) => line.trim().to_string(),
    }
}

/// `text` without its `/* */` and `//` comments.
fn strip_comments(text: &str) -> String {
    let comment = regex_lite::Regex::new(r"(?s)/\*.*?\*/|//[^\n]*").expect("a valid pattern");
    comment.replace_all(text, "").into_owned()
}

/// Every `NAME(PARAMS)` that follows `marker` in a declaration of `text`
/// (comments removed), in order: (NAME, each parameter declaration).
fn prototypes(text: &str, marker: &str) -> Vec<(String, Vec<String>)> {
    let mut found = Vec::new();
    for statement in strip_comments(text).split(';') {
        let declaration = statement.split_once(marker).map(|(_, after)| after);
        let Some((name, params)) = declaration.and_then(|text| text.split_once('(')) else {
            continue;
        };
        let name = name.trim().trim_end_matches(')');
        let params = params.split(')').next().unwrap_or_default().split(',');
        let params = params.map(|param| param.split_whitespace().collect::<Vec<_>>().join(" "));
        let params = params.filter(|param| !param.is_empty() && param != "void");
        if is_word(name) {
            found.push((name.to_string(), params.collect()));
        }
    }
    found
}

/// `CUdevice_v1` as `CUdevice`: a `CU` typedef without its version suffix.
fn unversioned(word: &str) -> &str {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_digit());
    match digits.strip_suffix("_v") {
        Some(plain) if word.starts_with("CU") && digits.len() < word.len() => plain,
        _ => word,
    }
}

/// A parameter declaration's type (`const CUDA_MEMCPY2D *pCopy` is `const
/// CUDA_MEMCPY2D *`): its name and `struct`/`enum` dropped, an array as a
/// pointer, `unsigned` as `unsigned int`, typedefs [`unversioned`].
fn param_type(param: &str) -> CType {
    let spaced = param.replace('*', " * ").replace('[', " * [");
    let kept = |word: &&str| !word.starts_with('[') && !["struct", "enum"].contains(word);
    let words = spaced.split_whitespace().filter(kept);
    let mut words: Vec<&str> = words.map(unversioned).collect();
    // The last word is the parameter's name unless the declaration is a bare type.
    if let [_, .., name] = words[..] {
        if is_word(name) && !C_WORDS.contains(&name) {
            words.pop();
        }
    }
    let mut c_type = CType::from(words.join(" "));
    c_type.is_const &= c_type.stars > 0;
    if c_type.base == "unsigned" {
        c_type.base.push_str(" int");
    }
    c_type
}

/// Every `(export, api, parameter declarations)` of `cuda_h`, in header
/// order; the export is the one the header's first `#define api api_vN` names.
fn declarations(cuda_h: &str) -> Vec<(String, String, Vec<String>)> {
    let mut renamed = BTreeMap::new();
    for line in strip_comments(cuda_h).lines() {
        if let ["#define", api, export] = line.split_whitespace().collect::<Vec<_>>()[..] {
            if api.starts_with("cu") && export.starts_with(api) && is_word(export) {
                renamed.entry(api.to_string()).or_insert(export.to_string());
            }
        }
    }
    let export = |api: &String| renamed.get(api).unwrap_or(api).clone();
    let found = prototypes(cuda_h, "CUresult CUDAAPI ").into_iter();
    found
        .map(|(api, params)| (export(&api), api, params))
        .collect()
}

/// A copy of `inputs` whose symbol list also holds every export `cuda_h`
/// declares that it lacks. Returns the copy and its symbol count.
pub fn with_full_api(inputs: &Inputs, cuda_h: &str) -> Result<(Inputs, usize)> {
    let bytes = inputs.get(DRIVER_SYMBOLS_PATH)?;
    let listed = SymbolList::parse(bytes)?.symbols.into_iter();
    let mut exports: BTreeSet<String> = listed.map(|symbol| symbol.export).collect();
    let mut list: Value = serde_json::from_slice(bytes).map_err(|error| error.to_string())?;
    let declared = declarations(cuda_h).into_iter();
    for (export, api, params) in declared.filter(|(export, ..)| exports.insert(export.clone())) {
        let mut entries = Vec::new();
        for (index, param) in params.iter().enumerate() {
            let mut c_type = param_type(param);
            if scalar(&c_type.base).is_none() {
                // Named as the list can name it (`unsigned short` as `cu_unsigned_short`).
                if c_type.base.starts_with(|c: char| c.is_ascii_lowercase()) {
                    c_type.base = format!("cu_{}", c_type.base.replace(' ', "_"));
                }
                if list["types"].get(&c_type.base).is_none() {
                    let stand_in = json!({ "kind": "enum", "bits": 32, "doc": "A cuda.h type." });
                    list["types"][&c_type.base] = stand_in;
                }
            }
            entries.push(json!({ "name": format!("p{index}"), "c_type": c_type.c_spelling() }));
        }
        let symbol = json!({
            "export": export, "api": api, "abi_version": 2000, "since": 2000,
            "params": entries, "components": { "runtime": "optional" }
        });
        if let Some(symbols) = list["symbols"].as_array_mut() {
            symbols.push(symbol);
        }
    }
    let bytes = serde_json::to_vec_pretty(&list).map_err(|error| error.to_string())?;
    // The copy must be a list the generator accepts, or the bench times an error.
    SymbolList::parse(&bytes)?;
    let mut copy = inputs.clone();
    copy.files.insert(DRIVER_SYMBOLS_PATH.to_string(), bytes);
    Ok((copy, exports.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::repo_root;

    #[test]
    fn declarations_become_list_entries() {
        let header = "#define cuMemAlloc cuMemAlloc_v2\n\
            /* a comment CUresult CUDAAPI cuHidden(int x); */\n\
            CUresult CUDAAPI cuInit(unsigned int Flags);\n\
            CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize); // trailing\n\
            __CUDA_DEPRECATED CUresult CUDAAPI cuOld(void);\n\
            CUresult CUDAAPI cuCopy(const CUDA_MEMCPY2D *pCopy, unsigned numChannels,\n\
                unsigned short *words);\n";
        let found = declarations(header);
        let names: Vec<(&str, &str)> = found
            .iter()
            .map(|(export, api, _)| (api.as_str(), export.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("cuInit", "cuInit"),
                ("cuMemAlloc", "cuMemAlloc_v2"),
                ("cuOld", "cuOld"),
                ("cuCopy", "cuCopy")
            ]
        );
        assert!(found[2].2.is_empty());
        let spell = |params: &[String]| -> Vec<String> {
            let types = params.iter().map(|param| param_type(param).c_spelling());
            types.collect()
        };
        assert_eq!(spell(&found[1].2), ["CUdeviceptr *", "size_t"]);
        // The copy of the list: the two new exports, with the types the list
        // spells, and a stand-in for each type it did not declare.
        let inputs = Inputs::read(&repo_root()).unwrap();
        let real = SymbolList::parse(inputs.get(DRIVER_SYMBOLS_PATH).unwrap()).unwrap();
        let (copy, count) = with_full_api(&inputs, header).unwrap();
        let full = SymbolList::parse(copy.get(DRIVER_SYMBOLS_PATH).unwrap()).unwrap();
        assert_eq!((count, full.symbols.len()), (real.symbols.len() + 2, count));
        let copied = full.symbols.last().unwrap();
        assert_eq!(copied.export, "cuCopy");
        let types: Vec<String> = copied
            .params
            .iter()
            .map(|param| param.c_type.c_spelling())
            .collect();
        assert_eq!(
            types,
            [
                "const CUDA_MEMCPY2D *",
                "unsigned int",
                "cu_unsigned_short *"
            ]
        );
        let new_types = full
            .types
            .keys()
            .filter(|name| !real.types.contains_key(*name));
        assert_eq!(
            new_types.collect::<Vec<_>>(),
            ["CUDA_MEMCPY2D", "cu_unsigned_short"]
        );
    }

    #[test]
    fn typedef_parameters_compare_in_the_list_spelling() {
        let typedefs = "typedef CUresult (CUDAAPI *PFN_cuMemAlloc_v3020)(CUdeviceptr_v2 *dptr, size_t bytesize);\n";
        let found = prototypes(typedefs, "(CUDAAPI *");
        assert_eq!(found[0].0, "PFN_cuMemAlloc_v3020");
        let types: Vec<String> = found[0]
            .1
            .iter()
            .map(|param| param_type(param).c_spelling())
            .collect();
        assert_eq!(types, ["CUdeviceptr *", "size_t"]);
    }
}

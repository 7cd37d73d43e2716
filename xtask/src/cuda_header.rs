//! NVIDIA's headers read as declarations: the prototypes of `cuda.h` and the
//! `PFN_` typedefs of `cudaTypedefs.h`, and their parameter types in the
//! symbol list's spelling. The ABI check compares the list's parameters with
//! the typedefs; the bench turns the 13.x `cuda.h` into a symbol list.
//!
//! For the bench, every `CUresult CUDAAPI name(...)` declaration becomes one
//! entry, named by the export its `#define name name_vN` selects (the
//! header's first definition). Only what rendering needs is faithful: the
//! parameter types are the header's, with every type the list does not
//! declare declared as a 32-bit enum (a stand-in: the render costs the
//! same); the parameters are named `p0`, `p1`, ...; versions are 2000.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::generate::inputs::{Inputs, DRIVER_SYMBOLS_PATH};
use crate::generate::symbols::{is_word, scalar, CType, SymbolList, C_WORDS};
use crate::Result;

/// `text` without its `/* */` and `//` comments.
fn strip_comments(text: &str) -> String {
    let comment = regex_lite::Regex::new(r"(?s)/\*.*?\*/|//[^\n]*").expect("a valid pattern");
    comment.replace_all(text, "").into_owned()
}

/// Every `NAME(PARAMS)` that follows `marker` in a declaration of `text`
/// (comments removed), in order: (NAME, each parameter declaration).
pub fn prototypes(text: &str, marker: &str) -> Vec<(String, Vec<String>)> {
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
pub fn param_type(param: &str) -> CType {
    let spaced = param.replace('*', " * ").replace('[', " * [");
    let words = spaced.split_whitespace();
    let mut words: Vec<&str> = words.filter(|word| !word.starts_with('[')).collect();
    words.retain(|word| *word != "struct" && *word != "enum");
    // The last word is the parameter's name unless the declaration is a bare type.
    if let [_, .., name] = words[..] {
        if is_word(name) && !C_WORDS.contains(&name) {
            words.pop();
        }
    }
    let stars = words.iter().filter(|word| **word == "*").count();
    let is_const = words.first() == Some(&"const") && stars > 0;
    words.retain(|word| *word != "*" && *word != "const");
    let mut base: Vec<&str> = words.into_iter().map(unversioned).collect();
    if base == ["unsigned"] {
        base.push("int");
    }
    let base = base.join(" ");
    CType {
        base,
        is_const,
        stars,
    }
}

/// A parameter declaration as a list C type: a scalar the list does not
/// spell (`unsigned char`, `short`) becomes a type name (`cu_unsigned_char`).
fn list_type(param: &str) -> CType {
    let mut c_type = param_type(param);
    let lowercase = c_type.base.starts_with(|c: char| c.is_ascii_lowercase());
    if scalar(&c_type.base).is_none() && lowercase {
        c_type.base = format!("cu_{}", c_type.base.replace(' ', "_"));
    }
    c_type
}

/// Every `(api, export, parameter declarations)` of `cuda_h`, in header order.
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
    let found = found.map(|(api, params)| (api.clone(), export(&api), params));
    found.collect()
}

/// A copy of `inputs` whose symbol list also holds every export `cuda_h`
/// declares that it lacks. Returns the copy and its symbol count.
pub fn with_full_api(inputs: &Inputs, cuda_h: &str) -> Result<(Inputs, usize)> {
    let bytes = inputs.get(DRIVER_SYMBOLS_PATH)?;
    let mut list: Value = serde_json::from_slice(bytes).map_err(|error| error.to_string())?;
    let listed = list["symbols"]
        .as_array()
        .ok_or("the list holds no symbols")?;
    let exports = listed
        .iter()
        .map(|symbol| symbol["export"].as_str().unwrap_or_default());
    let mut exports: BTreeSet<String> = exports.map(String::from).collect();
    let mut added = Vec::new();
    for (api, export, params) in declarations(cuda_h) {
        if !exports.insert(export.clone()) {
            continue;
        }
        let mut entries = Vec::new();
        for (index, param) in params.iter().enumerate() {
            let c_type = list_type(param);
            if scalar(&c_type.base).is_none() {
                let declared = &mut list["types"][&c_type.base];
                if declared.is_null() {
                    *declared = json!({ "kind": "enum", "bits": 32, "doc": "A cuda.h type." });
                }
            }
            entries.push(json!({ "name": format!("p{index}"), "c_type": c_type.c_spelling() }));
        }
        added.push(json!({
            "export": export, "api": api, "abi_version": 2000, "since": 2000,
            "returns": "CUresult", "params": entries, "components": { "runtime": "optional" }
        }));
    }
    let symbols = list["symbols"].as_array_mut();
    symbols.ok_or("the list holds no symbols")?.extend(added);
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
                unsigned char *bytes);\n";
        let found = declarations(header);
        let names: Vec<(&str, &str)> = found
            .iter()
            .map(|(api, export, _)| (api.as_str(), export.as_str()))
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
        let types: Vec<String> = found[1]
            .2
            .iter()
            .chain(&found[3].2)
            .map(|param| list_type(param).c_spelling())
            .collect();
        assert_eq!(
            types,
            [
                "CUdeviceptr *",
                "size_t",
                "const CUDA_MEMCPY2D *",
                "unsigned int",
                "cu_unsigned_char *"
            ]
        );
        // The copy of the list: the two new exports, and a stand-in for each
        // type it did not declare.
        let inputs = Inputs::read(&repo_root()).unwrap();
        let real = SymbolList::parse(inputs.get(DRIVER_SYMBOLS_PATH).unwrap()).unwrap();
        let (copy, count) = with_full_api(&inputs, header).unwrap();
        let full = SymbolList::parse(copy.get(DRIVER_SYMBOLS_PATH).unwrap()).unwrap();
        assert_eq!((count, full.symbols.len()), (real.symbols.len() + 2, count));
        let new_types = full
            .types
            .keys()
            .filter(|name| !real.types.contains_key(*name));
        assert_eq!(
            new_types.collect::<Vec<_>>(),
            ["CUDA_MEMCPY2D", "cu_unsigned_char"]
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

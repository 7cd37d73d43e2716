//! NVIDIA's headers read as declarations: the prototypes of `cuda.h` and the
//! `PFN_` typedefs of `cudaTypedefs.h`, and their parameter types in the
//! symbol list's spelling. The ABI check compares the list's parameters with
//! the typedefs; the bench turns the 13.x `cuda.h` into a symbol list.
//!
//! For the bench, every `CUresult CUDAAPI name(...)` declaration becomes one
//! entry, named by the export its `#define name name_vN` selects (the
//! header's first definition). Only what rendering needs is faithful: the
//! parameter types are the header's, with every type the list does not know
//! declared as a 32-bit enum in `types` (a stand-in: the render costs the
//! same); the parameters are named `p0`, `p1`, ...; versions are 2000.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::generate::inputs::{Inputs, DRIVER_SYMBOLS_PATH};
use crate::generate::symbols::{CType, SymbolList, BUILTIN_TYPES, SCALARS};
use crate::Result;

/// The words a C scalar type is spelt with (never a parameter's name).
const SCALAR_WORDS: [&str; 10] = [
    "void", "char", "short", "int", "unsigned", "signed", "long", "size_t", "float", "double",
];

fn is_word(text: &str) -> bool {
    !text.is_empty()
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !text.starts_with(|c: char| c.is_ascii_digit())
}

/// `text` without its `/* */` and `//` comments.
fn strip_comments(text: &str) -> String {
    let (mut out, mut rest) = (String::with_capacity(text.len()), text);
    while let Some(start) = rest.find("/*").into_iter().chain(rest.find("//")).min() {
        out.push_str(&rest[..start]);
        let (close, skip) = if rest[start..].starts_with("/*") {
            ("*/", 2)
        } else {
            ("\n", 0)
        };
        rest = rest[start + 2..]
            .find(close)
            .map_or("", |end| &rest[start + 2 + end + skip..]);
    }
    out + rest
}

/// Every `NAME ... (PARAMS)` that follows `marker` in `text` (comments
/// removed), in order: (NAME, each parameter declaration).
pub fn prototypes(text: &str, marker: &str) -> Vec<(String, Vec<String>)> {
    let text = strip_comments(text);
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find(marker) {
        rest = &rest[start + marker.len()..];
        let name_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        let (Some(name_end), Some(open)) = (name_end, rest.find('(')) else {
            break;
        };
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        let (name, between) = (&rest[..name_end], &rest[name_end..open]);
        let params = &rest[open + 1..open + close];
        rest = &rest[open + close..];
        if is_word(name) && between.chars().all(|c| c.is_whitespace() || c == ')') {
            let params = params
                .split(',')
                .map(|param| param.split_whitespace().collect::<Vec<_>>().join(" "));
            let params = params
                .filter(|param| !param.is_empty() && param != "void")
                .collect();
            found.push((name.to_string(), params));
        }
    }
    found
}

/// A parameter declaration's type (`const CUDA_MEMCPY2D *pCopy` is `const
/// CUDA_MEMCPY2D *`): its name and `struct`/`enum` dropped, an array as a
/// pointer, `unsigned` as `unsigned int`, and the `_vN` suffix of a `CU`
/// typedef dropped (`CUdevice_v1` is `CUdevice`).
pub fn param_type(param: &str) -> CType {
    let spaced = param.replace('*', " * ").replace('[', " * [");
    let mut words: Vec<&str> = spaced
        .split_whitespace()
        .filter(|word| !word.starts_with('[') && !["struct", "enum"].contains(word))
        .collect();
    // The last word is the parameter's name unless the declaration is a bare type.
    if words.len() > 1
        && is_word(words[words.len() - 1])
        && !SCALAR_WORDS.contains(&words[words.len() - 1])
    {
        words.pop();
    }
    let stars = words.iter().filter(|word| **word == "*").count();
    let is_const = words.first() == Some(&"const");
    let base: Vec<&str> = words
        .into_iter()
        .filter(|word| *word != "*" && *word != "const")
        .map(|word| match word.rsplit_once("_v") {
            Some((plain, version))
                if word.starts_with("CU")
                    && !version.is_empty()
                    && version.chars().all(|c| c.is_ascii_digit()) =>
            {
                plain
            }
            _ => word,
        })
        .collect();
    let base = match base.join(" ") {
        unsigned if unsigned == "unsigned" => "unsigned int".to_string(),
        base => base,
    };
    CType {
        base,
        is_const: is_const && stars > 0,
        stars,
    }
}

/// A parameter declaration as a list C type, recording in `new_types` the
/// names the list must declare (`unsigned char`, `short`, `cuuint64_t`, ...
/// become stand-ins named `cu_unsigned_char`, ...).
fn list_type(param: &str, known: &BTreeSet<String>, new_types: &mut BTreeSet<String>) -> String {
    let mut c_type = param_type(param);
    if !SCALARS.iter().any(|entry| entry.0 == c_type.base) {
        if c_type.base.starts_with(|c: char| c.is_ascii_lowercase()) {
            c_type.base = format!("cu_{}", c_type.base.replace(' ', "_"));
        }
        if !known.contains(&c_type.base) {
            new_types.insert(c_type.base.clone());
        }
    }
    if c_type.base == "void" && c_type.stars == 0 {
        return "int".to_string();
    }
    c_type.c_spelling()
}

/// Every `(api, export, parameter declarations)` of `cuda_h`, in header order.
fn declarations(cuda_h: &str) -> Vec<(String, String, Vec<String>)> {
    let mut renamed = BTreeMap::new();
    for line in strip_comments(cuda_h).lines() {
        if let ["#define", api, export] = line.split_whitespace().collect::<Vec<_>>()[..] {
            if api.starts_with("cu") && export.starts_with(api) && is_word(export) {
                renamed
                    .entry(api.to_string())
                    .or_insert_with(|| export.to_string());
            }
        }
    }
    let found = prototypes(cuda_h, "CUresult CUDAAPI ").into_iter();
    found
        .map(|(api, params)| {
            (
                api.clone(),
                renamed.get(&api).cloned().unwrap_or(api),
                params,
            )
        })
        .collect()
}

/// A copy of `inputs` whose symbol list also holds every export `cuda_h`
/// declares that it lacks. Returns the copy and its symbol count.
pub fn with_full_api(inputs: &Inputs, cuda_h: &str) -> Result<(Inputs, usize)> {
    let mut list: Value = serde_json::from_slice(inputs.get(DRIVER_SYMBOLS_PATH)?)
        .map_err(|error| format!("{DRIVER_SYMBOLS_PATH}: {error}"))?;
    let mut known: BTreeSet<String> = BUILTIN_TYPES
        .iter()
        .map(|entry| entry.0.to_string())
        .collect();
    known.extend(
        list["types"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, _)| name.clone()),
    );
    let mut exports: BTreeSet<String> = list["symbols"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|symbol| symbol["export"].as_str().map(str::to_string))
        .collect();
    let (mut new_types, mut added) = (BTreeSet::new(), Vec::new());
    for (api, export, params) in declarations(cuda_h) {
        if exports.insert(export.clone()) {
            let params: Vec<Value> = params
                .iter()
                .enumerate()
                .map(|(index, param)| json!({ "name": format!("p{index}"), "c_type": list_type(param, &known, &mut new_types) }))
                .collect();
            added.push(json!({
                "export": export, "api": api, "abi_version": 2000, "since": 2000,
                "returns": "CUresult", "params": params, "components": { "runtime": "optional" }
            }));
        }
    }
    for name in new_types {
        list["types"][name.as_str()] =
            json!({ "kind": "enum", "bits": 32, "doc": "A cuda.h type." });
    }
    let symbols = list["symbols"]
        .as_array_mut()
        .ok_or_else(|| format!("{DRIVER_SYMBOLS_PATH}: no symbols list"))?;
    symbols.extend(added);
    let count = symbols.len();
    let bytes = serde_json::to_vec_pretty(&list).map_err(|error| error.to_string())?;
    // The copy must be a list the generator accepts, or the bench times an error.
    SymbolList::parse(&bytes)?;
    let mut copy = inputs.clone();
    copy.files.insert(DRIVER_SYMBOLS_PATH.to_string(), bytes);
    Ok((copy, count))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let known = BTreeSet::from(["CUdeviceptr".to_string()]);
        let mut new_types = BTreeSet::new();
        let types: Vec<String> = found[1]
            .2
            .iter()
            .chain(&found[3].2)
            .map(|param| list_type(param, &known, &mut new_types))
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
        assert_eq!(
            new_types.into_iter().collect::<Vec<_>>(),
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

//! The whole CUDA Driver API as a symbol list, read from NVIDIA's `cuda.h`
//! (the 13.x header set the ABI check fetches): the bench's input for the
//! generator at full size.
//!
//! Every `CUresult CUDAAPI name(...)` declaration becomes one entry, named
//! by the export its `#define name name_vN` selects (the header's first
//! definition). Only what rendering needs is faithful: the parameter types
//! are the header's, with every type the list does not know declared as a
//! 32-bit enum in `types` (a stand-in: the render costs the same); the
//! parameters are named `p0`, `p1`, ...; versions are 2000.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::generate::inputs::{Inputs, DRIVER_SYMBOLS_PATH};
use crate::generate::symbols::{SymbolList, BUILTIN_TYPES};
use crate::Result;

/// The words a C scalar type is spelt with (never a parameter's name).
const SCALAR_WORDS: [&str; 10] = [
    "void", "char", "short", "int", "unsigned", "signed", "long", "size_t", "float", "double",
];

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
    let mut new_types = BTreeMap::new();
    let mut added = Vec::new();
    for (api, export, params) in declarations(cuda_h) {
        if !exports.insert(export.clone()) {
            continue;
        }
        let mut entries = Vec::new();
        for (index, param) in params.iter().enumerate() {
            let c_type = list_type(param, &known, &mut new_types);
            entries.push(json!({ "name": format!("p{index}"), "c_type": c_type }));
        }
        added.push(json!({
            "export": export, "api": api, "abi_version": 2000, "since": 2000,
            "returns": "CUresult", "params": entries,
            "components": { "runtime": "optional" }
        }));
    }
    for name in new_types.into_keys() {
        list["types"][name.as_str()] =
            json!({ "kind": "enum", "bits": 32, "doc": "A cuda.h type." });
    }
    let symbols = list["symbols"]
        .as_array_mut()
        .ok_or_else(|| format!("{DRIVER_SYMBOLS_PATH}: no symbols list"))?;
    symbols.extend(added);
    let count = symbols.len();
    let mut copy = inputs.clone();
    let bytes = serde_json::to_vec_pretty(&list).map_err(|error| error.to_string())?;
    // The copy must be a list the generator accepts, or the bench times an error.
    SymbolList::parse(&bytes)?;
    copy.files.insert(DRIVER_SYMBOLS_PATH.to_string(), bytes);
    Ok((copy, count))
}

/// Every `(api, export, parameter declarations)` of `cuda_h`, in header order.
fn declarations(cuda_h: &str) -> Vec<(String, String, Vec<String>)> {
    let text = strip_comments(cuda_h);
    let mut renamed = BTreeMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["#define", api, export] = words[..] {
            if api.starts_with("cu") && export.starts_with(api) && is_word(export) {
                renamed
                    .entry(api.to_string())
                    .or_insert_with(|| export.to_string());
            }
        }
    }
    let mut found = Vec::new();
    let marker = "CUresult CUDAAPI ";
    let mut rest = text.as_str();
    while let Some(start) = rest.find(marker) {
        rest = &rest[start + marker.len()..];
        let Some(open) = rest.find('(') else { break };
        let api = rest[..open].trim().to_string();
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        let params = &rest[open + 1..open + close];
        rest = &rest[open + close..];
        if !is_word(&api) {
            continue;
        }
        let params: Vec<String> = params
            .split(',')
            .map(|param| param.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|param| !param.is_empty() && param != "void")
            .collect();
        let export = renamed.get(&api).cloned().unwrap_or_else(|| api.clone());
        found.push((api, export, params));
    }
    found
}

/// A parameter declaration (`const CUDA_MEMCPY2D *pCopy`) as a list C type
/// (`const CUDA_MEMCPY2D *`), recording in `new_types` the names it needs.
fn list_type(
    param: &str,
    known: &BTreeSet<String>,
    new_types: &mut BTreeMap<String, ()>,
) -> String {
    let spaced = param.replace('*', " * ").replace('[', " * [");
    let mut words: Vec<&str> = spaced
        .split_whitespace()
        .filter(|word| !word.starts_with('[') && *word != "struct" && *word != "enum")
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
        .collect();
    let mut base = base.join(" ");
    if base == "unsigned" {
        base = "unsigned int".to_string();
    }
    let supported = [
        "void",
        "char",
        "int",
        "unsigned int",
        "long long",
        "unsigned long long",
        "size_t",
        "float",
        "double",
    ]
    .contains(&base.as_str());
    if !supported {
        // `unsigned char`, `short`, `cuuint64_t`, ...: stand-ins like any other unknown type.
        if base.starts_with(|c: char| c.is_ascii_lowercase()) {
            base = format!("cu_{}", base.replace(' ', "_"));
        }
        if !known.contains(&base) {
            new_types.insert(base.clone(), ());
        }
    }
    if base == "void" && stars == 0 {
        return "int".to_string();
    }
    let mut c_type = if is_const && stars > 0 {
        format!("const {base}")
    } else {
        base
    };
    for _ in 0..stars {
        c_type.push_str(" *");
    }
    c_type
}

fn is_word(text: &str) -> bool {
    !text.is_empty()
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !text.starts_with(|c: char| c.is_ascii_digit())
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.is_none_or(|l| b < l) => {
                out.push_str(&rest[..b]);
                rest = rest[b + 2..]
                    .find("*/")
                    .map_or("", |end| &rest[b + 2 + end + 2..]);
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |end| &rest[l + end..]);
            }
            _ => {
                out.push_str(rest);
                rest = "";
            }
        }
    }
    out
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
        let mut new_types = BTreeMap::new();
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
            new_types.into_keys().collect::<Vec<_>>(),
            ["CUDA_MEMCPY2D", "cu_unsigned_char"]
        );
    }
}

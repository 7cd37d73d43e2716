//! `cargo xtask verify-determinism` (docs/maintainers.md's commands): the generator
//! in child processes of this binary under [`VARIANTS`], then `dist` from
//! the tree and from a copy at another path, every byte compared.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::generate::fs::write_atomic;
use crate::generate::inputs::Inputs;
use crate::generate::{drift, render, sha256_hex, Drift, Output};
use crate::paths::scratch;
use crate::paths::{at, repo_root, target_dir};
use crate::process::output;
use crate::Result;

/// One set of conditions for a child generator run: its umask, the variables
/// it gets (an empty value: unset), whether it runs from `/` (else from the
/// scratch tree), and whether the inputs are created in reverse path order.
#[rustfmt::skip]
struct Variant(&'static str, &'static [(&'static str, &'static str)], bool, bool);

#[rustfmt::skip]
const VARIANTS: [Variant; 3] = [
    Variant("022", &[("TZ", "UTC"), ("LC_ALL", "C"), ("SOURCE_DATE_EPOCH", "")], false, false),
    Variant("077", &[("TZ", "Pacific/Chatham"), ("LC_ALL", "tr_TR.UTF-8"),
                     ("SOURCE_DATE_EPOCH", "1")], true, true),
    Variant("002", &[("TZ", "Asia/Kathmandu"), ("LANG", "de_DE.UTF-8"),
                     ("SOURCE_DATE_EPOCH", "2000000000"), ("LC_ALL", "")], false, true),
];

impl Variant {
    fn name(&self) -> String {
        let Variant(umask, env, cwd_root, reverse) = self;
        let env = env.iter().map(|(name, value)| match *value {
            "" => format!("no {name}"),
            value => format!("{name}={value}"),
        });
        let env = env.collect::<Vec<_>>().join(", ");
        let cwd = if *cwd_root { "/" } else { "tree" };
        let order = if *reverse { "reverse" } else { "sorted" };
        format!("umask {umask}, {env}, cwd={cwd}, {order} creation")
    }
}

/// Regenerates in fresh directories under varied conditions and compares every byte.
pub fn verify() -> Result<()> {
    let root = repo_root();
    let inputs = Inputs::read(&root)?;
    let baseline = render(&inputs)?;
    // The running image, even when a concurrent cargo build has replaced the
    // file it was started from: exactly the generator to compare.
    let exe = PathBuf::from(format!("/proc/{}/exe", std::process::id()));
    let mut failures = Vec::new();
    let mut report = |what: String, differences: Vec<String>| {
        if differences.is_empty() {
            println!("verify-determinism: identical {what}");
        } else {
            failures.push(format!("not identical {what}:\n{}", differences.join("\n")));
        }
    };
    for variant in &VARIANTS {
        let scratch = scratch("determinism")?;
        write_inputs(scratch.path(), &inputs, variant.3)?;
        run_child(&exe, scratch.path(), variant)?;
        let differences = compare_tree(scratch.path(), &baseline)?;
        report(format!("under [{}]", variant.name()), differences);
    }
    let mut tree = compare_tree(&root, &baseline)?;
    if !tree.is_empty() {
        tree.push("  (run `cargo xtask generate`)".into());
    }
    report("to the files in the tree".into(), tree);
    let what = "`dist` from the tree and from a copy at another path";
    report(what.into(), compare_dist_builds()?);
    if !failures.is_empty() {
        let failures = failures.join("\n");
        return Err(format!("generation is not deterministic:\n{failures}"));
    }
    let (files, runs) = (baseline.len(), VARIANTS.len() + 1);
    println!("verify-determinism: {files} files byte-identical across {runs} runs and the tree");
    Ok(())
}

/// Writes the inputs under `root` (each through a temporary name), in path
/// order or in reverse, so that directory listing order differs.
fn write_inputs(root: &Path, inputs: &Inputs, reverse: bool) -> Result<()> {
    let mut files: Vec<_> = inputs.files.iter().collect();
    if reverse {
        files.reverse();
    }
    let write = |(path, bytes): (&String, &Vec<u8>)| write_atomic(&root.join(path), bytes);
    files.into_iter().try_for_each(write)
}

fn run_child(exe: &Path, tree: &Path, variant: &Variant) -> Result<()> {
    let Variant(umask, env, cwd_root, _) = variant;
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
        .arg(exe)
        .args(["generate", "--root"])
        .arg(tree)
        .current_dir(if *cwd_root { Path::new("/") } else { tree });
    for (name, value) in *env {
        match *value {
            "" => command.env_remove(name),
            value => command.env(name, value),
        };
    }
    output(&mut command).map(drop)
}

/// Every difference between `expected` and the files under `root`, described.
fn compare_tree(root: &Path, expected: &[Output]) -> Result<Vec<String>> {
    let describe = |change: Drift| {
        let Drift::Stale(path) = &change else {
            return Ok(format!("  {change}"));
        };
        let actual = std::fs::read(root.join(path)).map_err(at(&root.join(path)))?;
        let wanted = expected.iter().find(|item| &item.path == path);
        let wanted = wanted.map_or(&[][..], |item| &item.bytes);
        let difference = describe_difference(path, wanted, &actual);
        Ok(format!("  {path}: {difference}"))
    };
    drift(root, expected)?.into_iter().map(describe).collect()
}

/// Every difference between the shipped binaries and `dist` artifacts built
/// from the tree and from its copy (`target/repro/tree`, own cargo target).
fn compare_dist_builds() -> Result<Vec<String>> {
    let copy = copy_of_tree()?;
    let (first_out, second_out) = (scratch("dist-a")?, scratch("dist-b")?);
    let first = crate::dist::build_all(&repo_root(), first_out.path())?;
    let second = crate::dist::build_all(&copy, second_out.path())?;
    // Both make the same list of files by construction (each target, each kind).
    let mut differences = Vec::new();
    let pairs = (first.binaries.iter().zip(&second.binaries))
        .chain(first.artifacts.iter().zip(&second.artifacts));
    let read = |path: &Path| std::fs::read(path).map_err(at(path));
    for (a, b) in pairs {
        let (a_bytes, b_bytes) = (read(a)?, read(b)?);
        let pair = format!("{} vs {}", a.display(), b.display());
        if a.file_name() != b.file_name() {
            differences.push(format!("  {pair}: the names differ"));
        } else if a_bytes != b_bytes {
            let (a_len, b_len) = (a_bytes.len(), b_bytes.len());
            let offset = a_bytes.iter().zip(&b_bytes).position(|(x, y)| x != y);
            let offset = offset.unwrap_or(a_len.min(b_len));
            differences.push(format!(
                "  {pair}: sizes {a_len} and {b_len}, first differing byte at offset {offset}"
            ));
        } else {
            let digest = sha256_hex(&a_bytes);
            println!("verify-determinism: {pair}: both sha256 {digest}");
        }
    }
    Ok(differences)
}

/// The tree's files (tracked, and new ones git does not ignore) copied to
/// `target/repro/tree`; what was there before is removed, except the copy's
/// own `target/`, which keeps its build caches between runs.
fn copy_of_tree() -> Result<PathBuf> {
    let (root, copy) = (repo_root(), target_dir().join("repro/tree"));
    let kept = copy.with_file_name("kept-target");
    let _ = std::fs::rename(copy.join("target"), &kept);
    match std::fs::remove_dir_all(&copy) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(at(&copy)(error)),
        _ => std::fs::create_dir_all(&copy).map_err(at(&copy)),
    }?;
    let _ = std::fs::rename(&kept, copy.join("target"));
    let mut git = Command::new("git");
    let args = "ls-files -z --cached --others --exclude-standard".split(' ');
    let listed = output(git.current_dir(&root).args(args))?;
    // A tracked file deleted in the working tree is not part of it.
    for relative in listed.split('\0').filter(|name| root.join(name).is_file()) {
        crate::paths::copy(&root.join(relative), &copy.join(relative))?;
    }
    Ok(copy)
}

/// Says where two versions of one generated file differ.
fn describe_difference(path: &str, expected: &[u8], actual: &[u8]) -> String {
    if path.ends_with(".tar.gz") {
        return describe_tar_gz(expected, actual);
    }
    let (a, b) = (
        String::from_utf8_lossy(expected),
        String::from_utf8_lossy(actual),
    );
    let (a, b): (Vec<&str>, Vec<&str>) = (a.split('\n').collect(), b.split('\n').collect());
    let Some(index) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) else {
        return "differs only in bytes that are not text".to_string();
    };
    let line = |lines: &[&str]| shorten(lines.get(index).copied());
    let (number, a, b) = (index + 1, line(&a), line(&b));
    format!("line {number} differs: expected `{a}`, found `{b}`")
}

/// A line cut to 80 characters, for messages.
fn shorten(line: Option<&str>) -> String {
    let line = line.unwrap_or("<end of file>");
    match line.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line.to_string(),
    }
}

const GZIP_HEADER_FIELDS: [(&str, std::ops::Range<usize>); 6] = [
    ("magic", 0..2),
    ("compression method", 2..3),
    ("flags (file name, comment, extra)", 3..4),
    ("mtime", 4..8),
    ("extra flags (level)", 8..9),
    ("os", 9..10),
];

fn describe_tar_gz(expected: &[u8], actual: &[u8]) -> String {
    let fields: Vec<String> = GZIP_HEADER_FIELDS
        .into_iter()
        .map(|(name, range)| (name, expected.get(range.clone()), actual.get(range)))
        .filter(|(_, a, b)| a != b)
        .map(|(name, a, b)| format!("gzip header field {name} ({a:?} vs {b:?})"))
        .collect();
    if !fields.is_empty() {
        return fields.join("; ");
    }
    let described = describe_tars(expected, actual);
    described.unwrap_or_else(|error| format!("an archive does not decompress or parse: {error}"))
}

/// Where two gzip streams of tar archives differ past their gzip headers.
fn describe_tars(expected: &[u8], actual: &[u8]) -> std::io::Result<String> {
    let (expected, actual) = (gunzip(expected)?, gunzip(actual)?);
    if expected == actual {
        let why = "the compressed stream differs (same tar bytes): compression level or backend";
        return Ok(why.into());
    }
    let (expected, actual) = (tar_entries(&expected)?, tar_entries(&actual)?);
    let mut differences = Vec::new();
    for (a, b) in expected.iter().zip(&actual) {
        let changed = a.iter().zip(b).filter(|(x, y)| x != y);
        for ((name, x), (_, y)) in changed {
            let entry = &a[0].1;
            differences.push(format!("entry {entry}: field {name} ({x} vs {y})"));
        }
    }
    if expected.len() != actual.len() {
        let (a, b) = (expected.len(), actual.len());
        differences.push(format!("entry count ({a} vs {b})"));
    }
    if differences.is_empty() {
        let why =
            "tar bytes differ outside entry fields (padding, trailer or unparsed header bytes)";
        differences.push(why.into());
    }
    Ok(differences.join("; "))
}

fn gunzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out)?;
    Ok(out)
}

/// Each tar entry's path, header fields and content, as comparable text.
fn tar_entries(bytes: &[u8]) -> std::io::Result<Vec<Vec<(&'static str, String)>>> {
    let mut entries = Vec::new();
    for entry in tar::Archive::new(bytes).entries()? {
        let mut entry = entry?;
        let header = entry.header().clone();
        let shown = |value: std::io::Result<String>| {
            value.unwrap_or_else(|error| format!("unreadable ({error})"))
        };
        let octal = |value: std::io::Result<u64>| shown(value.map(|number| format!("{number:o}")));
        let name = |value: Option<&[u8]>| format!("{:?}", value.map(String::from_utf8_lossy));
        let mut content = Vec::new();
        entry.read_to_end(&mut content)?;
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        entries.push(vec![
            ("path", format!("`{path}`")),
            ("mode", octal(header.mode().map(u64::from))),
            ("uid", octal(header.uid())),
            ("gid", octal(header.gid())),
            ("uname", name(header.username_bytes())),
            ("gname", name(header.groupname_bytes())),
            ("mtime", shown(header.mtime().map(|time| time.to_string()))),
            ("size", shown(header.size().map(|size| size.to_string()))),
            ("type", format!("{:?}", header.entry_type())),
            ("content", format!("sha256 {}", sha256_hex(&content))),
        ]);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::tarball;

    /// Compares two sets of outputs in memory, e.g. two renders.
    fn compare_outputs(expected: &[Output], actual: &[Output]) -> Vec<String> {
        let mut report = Vec::new();
        for wanted in expected {
            match actual.iter().find(|item| item.path == wanted.path) {
                None => report.push(format!("  {}: missing", wanted.path)),
                Some(found) if found.bytes != wanted.bytes => report.push(format!(
                    "  {}: {}",
                    wanted.path,
                    describe_difference(&wanted.path, &wanted.bytes, &found.bytes)
                )),
                Some(_) => {}
            }
        }
        for found in actual {
            if !expected.iter().any(|item| item.path == found.path) {
                report.push(format!("  {}: unexpected", found.path));
            }
        }
        report
    }

    fn sample_tar_gz() -> Vec<u8> {
        tarball::build(
            "top",
            &[
                ("b.rs".to_string(), b"fn b() {}\n".to_vec()),
                ("a.rs".to_string(), b"fn a() {}\n".to_vec()),
            ],
        )
        .unwrap()
    }

    /// Rewrites one octal header field of the first entry and fixes the checksum.
    fn perturb_first_header(tar_gz: &[u8], field: std::ops::Range<usize>, value: &[u8]) -> Vec<u8> {
        let mut tar_bytes = gunzip(tar_gz).unwrap();
        tar_bytes[field].copy_from_slice(value);
        tar_bytes[148..156].copy_from_slice(b"        ");
        let sum: u32 = tar_bytes[..512].iter().map(|&byte| u32::from(byte)).sum();
        tar_bytes[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        tarball::gzip(&tar_bytes).unwrap()
    }

    #[test]
    fn tarball_is_sorted_and_stable() {
        let first = sample_tar_gz();
        assert_eq!(first, sample_tar_gz());
        let entries = tar_entries(&gunzip(&first).unwrap()).unwrap();
        let paths: Vec<_> = entries.iter().map(|entry| entry[0].1.as_str()).collect();
        assert_eq!(paths, ["`top/a.rs`", "`top/b.rs`"]);
        assert!(entries
            .iter()
            .all(|entry| entry[1..3] == [("mode", "644".into()), ("uid", "0".into())]));
        assert_eq!(first[4..8], [0, 0, 0, 0], "gzip mtime is zero");
        assert_eq!(first[9], tarball::GZIP_OS);
    }

    #[test]
    fn names_the_entry_and_header_field_that_differs() {
        let original = sample_tar_gz();
        let changed_mtime = perturb_first_header(&original, 136..148, b"00000000001\0");
        let report = describe_difference("x.tar.gz", &original, &changed_mtime);
        assert!(report.contains("entry `top/a.rs`"), "{report}");
        assert!(report.contains("field mtime"), "{report}");

        let changed_mode = perturb_first_header(&original, 100..108, b"0000755\0");
        let report = describe_difference("x.tar.gz", &original, &changed_mode);
        assert!(
            report.contains("entry `top/a.rs`: field mode (644 vs 755)"),
            "{report}"
        );

        let changed_uid = perturb_first_header(&original, 108..116, b"0001750\0");
        let report = describe_difference("x.tar.gz", &original, &changed_uid);
        assert!(report.contains("field uid"), "{report}");
    }

    #[test]
    fn names_the_gzip_header_field_that_differs() {
        let original = sample_tar_gz();
        let mut changed = original.clone();
        changed[9] = 3;
        let report = describe_difference("x.tar.gz", &original, &changed);
        assert!(report.contains("gzip header field os"), "{report}");
        let mut changed = original.clone();
        changed[4] = 1;
        let report = describe_difference("x.tar.gz", &original, &changed);
        assert!(report.contains("gzip header field mtime"), "{report}");
    }

    #[test]
    fn names_the_file_and_line_after_one_input_byte_changes() {
        let inputs = Inputs::read(&repo_root()).unwrap();
        let baseline = render(&inputs).unwrap();
        let mut perturbed = inputs.clone();
        let spec = perturbed
            .files
            .get_mut(crate::generate::inputs::PROVIDER_SPEC_PATH)
            .unwrap();
        // A probe code's explanation: spec.rs holds it too, as its doc.
        let needle = b"The driver loaded but reports no";
        let at = spec
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap();
        spec[at] = b't';
        let report = compare_outputs(&baseline, &render(&perturbed).unwrap()).join("\n");
        assert!(
            report.contains("probe/src/generated/spec.rs: line "),
            "{report}"
        );
        assert!(
            report.contains("python/rextio_device_cuda/_provider_spec.py: line "),
            "{report}"
        );
        assert!(report.contains("generated/index.json: line "), "{report}");
        // The symbol table does not depend on the spec.
        assert!(!report.contains("runtime/src/driver_api.rs"), "{report}");
    }

    #[test]
    fn reverse_creation_order_gives_the_same_outputs() {
        let inputs = Inputs::read(&repo_root()).unwrap();
        let scratch = scratch("determinism-test").unwrap();
        write_inputs(scratch.path(), &inputs, true).unwrap();
        let reread = Inputs::read(scratch.path()).unwrap();
        assert_eq!(reread, inputs);
        assert!(compare_outputs(&render(&inputs).unwrap(), &render(&reread).unwrap()).is_empty());
    }
}

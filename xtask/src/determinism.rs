//! `cargo xtask verify-determinism`: regenerates every output in fresh
//! directories, in child processes of this binary under varied conditions
//! (working directory, umask, TZ, locale, SOURCE_DATE_EPOCH, the order in
//! which the inputs were created), and compares every byte among the runs
//! and with the files in the tree. A difference names the file and, for the
//! tarball, the entry and header field (or the gzip header field).

use std::io::Read;
use std::path::Path;
use std::process::Command;

use crate::generate::fs::write_atomic;
use crate::generate::inputs::Inputs;
use crate::generate::{drift, render, Drift, Output};
use crate::paths::repo_root;
use crate::process::describe;
use crate::scratch::ScratchDir;
use crate::Result;

pub fn command(args: &[String]) -> Result<()> {
    crate::no_arguments("verify-determinism", args);
    verify()
}

/// One set of conditions for a child generator run.
struct Variant {
    name: &'static str,
    umask: &'static str,
    env: &'static [(&'static str, &'static str)],
    unset: &'static [&'static str],
    /// Run from `/` instead of the scratch tree's root.
    cwd_filesystem_root: bool,
    /// Create the input files in reverse path order, through temporary names.
    reverse_creation: bool,
}

const VARIANTS: [Variant; 3] = [
    Variant {
        name: "umask 022, TZ=UTC, LC_ALL=C, no SOURCE_DATE_EPOCH, cwd=tree, sorted creation",
        umask: "022",
        env: &[("TZ", "UTC"), ("LC_ALL", "C")],
        unset: &["SOURCE_DATE_EPOCH"],
        cwd_filesystem_root: false,
        reverse_creation: false,
    },
    Variant {
        name: "umask 077, TZ=Pacific/Chatham, LC_ALL=tr_TR.UTF-8, SOURCE_DATE_EPOCH=1, cwd=/, \
               reverse creation",
        umask: "077",
        env: &[
            ("TZ", "Pacific/Chatham"),
            ("LC_ALL", "tr_TR.UTF-8"),
            ("SOURCE_DATE_EPOCH", "1"),
        ],
        unset: &[],
        cwd_filesystem_root: true,
        reverse_creation: true,
    },
    Variant {
        name: "umask 002, TZ=Asia/Kathmandu, LANG=de_DE.UTF-8, SOURCE_DATE_EPOCH=2000000000, \
               cwd=tree, reverse creation",
        umask: "002",
        env: &[
            ("TZ", "Asia/Kathmandu"),
            ("LANG", "de_DE.UTF-8"),
            ("SOURCE_DATE_EPOCH", "2000000000"),
        ],
        unset: &["LC_ALL"],
        cwd_filesystem_root: false,
        reverse_creation: true,
    },
];

/// Regenerates in fresh directories under varied conditions and compares every byte.
pub fn verify() -> Result<()> {
    let root = repo_root();
    let inputs = Inputs::read(&root)?;
    let baseline = render(&inputs)?;
    let exe = generator_executable()?;
    let mut failures = Vec::new();

    for variant in &VARIANTS {
        let scratch = ScratchDir::new("determinism")?;
        write_inputs(scratch.path(), &inputs, variant.reverse_creation)?;
        run_child(&exe, scratch.path(), variant)?;
        let report = compare_tree(scratch.path(), &baseline)?;
        if report.is_empty() {
            println!("verify-determinism: identical under [{}]", variant.name);
        } else {
            failures.push(format!("under [{}]:\n{}", variant.name, report.join("\n")));
        }
    }

    let committed = compare_tree(&root, &baseline)?;
    if committed.is_empty() {
        println!("verify-determinism: identical to the files in the tree");
    } else {
        failures.push(format!(
            "the files in the tree differ (run `cargo xtask generate`):\n{}",
            committed.join("\n")
        ));
    }

    let dist = compare_dist_builds()?;
    if !dist.is_empty() {
        failures.push(format!(
            "`dist` from the tree and from a copy at another path differ:\n{}",
            dist.join("\n")
        ));
    }

    if failures.is_empty() {
        println!(
            "verify-determinism: {} files byte-identical across {} runs and the tree",
            baseline.len(),
            VARIANTS.len() + 1
        );
        Ok(())
    } else {
        Err(format!(
            "generation is not deterministic:\n{}",
            failures.join("\n")
        ))
    }
}

/// The xtask binary itself: the child runs `xtask generate --root DIR`.
fn generator_executable() -> Result<std::path::PathBuf> {
    let exe = std::env::current_exe().map_err(|error| format!("current executable: {error}"))?;
    let name = exe.file_name().and_then(|name| name.to_str()).unwrap_or("");
    // A concurrent cargo build may replace the binary while this one runs
    // (Linux then reports "xtask (deleted)"); /proc/<this pid>/exe still names
    // the running image, which is exactly the generator that must be compared.
    let self_image = std::path::PathBuf::from(format!("/proc/{}/exe", std::process::id()));
    if name == "xtask" || name.starts_with("xtask ") {
        Ok(if self_image.exists() { self_image } else { exe })
    } else {
        Err(format!(
            "verify-determinism must run from the xtask binary, not {}",
            exe.display()
        ))
    }
}

/// Writes the inputs under `root`; in reverse mode, in reverse path order
/// and through temporary names, so directory listing order differs.
fn write_inputs(root: &Path, inputs: &Inputs, reverse: bool) -> Result<()> {
    let mut files: Vec<(&String, &Vec<u8>)> = inputs.files.iter().collect();
    if reverse {
        files.reverse();
    }
    for (path, bytes) in files {
        let target = root.join(path);
        if reverse {
            let parent = target.parent().ok_or("input without parent")?;
            std::fs::create_dir_all(parent).map_err(|error| format!("{path}: {error}"))?;
            let temporary = parent.join(format!("zz-{}.partial", bytes.len()));
            std::fs::write(&temporary, bytes).map_err(|error| format!("{path}: {error}"))?;
            std::fs::rename(&temporary, &target).map_err(|error| format!("{path}: {error}"))?;
        } else {
            write_atomic(&target, bytes)?;
        }
    }
    Ok(())
}

fn run_child(exe: &Path, tree: &Path, variant: &Variant) -> Result<()> {
    let mut command = if cfg!(unix) {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("umask {}; exec \"$0\" \"$@\"", variant.umask))
            .arg(exe);
        command
    } else {
        Command::new(exe)
    };
    command.arg("generate").arg("--root").arg(tree);
    command.current_dir(if variant.cwd_filesystem_root {
        Path::new("/")
    } else {
        tree
    });
    for (name, value) in variant.env {
        command.env(name, value);
    }
    for name in variant.unset {
        command.env_remove(name);
    }
    let shown = describe(&command);
    let output = command
        .output()
        .map_err(|error| format!("could not start `{shown}`: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{shown}` failed with {}:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Every difference between `expected` and the files under `root`, described.
pub fn compare_tree(root: &Path, expected: &[Output]) -> Result<Vec<String>> {
    let mut report = Vec::new();
    for change in drift(root, expected)? {
        match &change {
            Drift::Stale(path) => {
                let actual = std::fs::read(root.join(path))
                    .map_err(|error| format!("{path}: cannot read: {error}"))?;
                let wanted = expected
                    .iter()
                    .find(|item| &item.path == path)
                    .map(|item| item.bytes.as_slice())
                    .unwrap_or_default();
                report.push(format!(
                    "  {path}: {}",
                    describe_difference(path, wanted, &actual)
                ));
            }
            other => report.push(format!("  {other}")),
        }
    }
    Ok(report)
}

/// Builds every `dist` artifact twice, from the tree and from a copy of it
/// at another path (`target/repro/tree`, its own cargo target inside), and
/// compares the shipped binaries and the artifacts byte for byte; returns
/// each difference.
fn compare_dist_builds() -> Result<Vec<String>> {
    let copy = copy_of_tree()?;
    let (first_out, second_out) = (ScratchDir::new("dist-a")?, ScratchDir::new("dist-b")?);
    let first = crate::dist::build_all(&repo_root(), first_out.path())?;
    let second = crate::dist::build_all(&copy, second_out.path())?;
    let mut differences = Vec::new();
    let pairs = first
        .binaries
        .iter()
        .zip(&second.binaries)
        .chain(first.artifacts.iter().zip(&second.artifacts));
    for (a, b) in pairs {
        // A binary by its place in the tree; an artifact (in a scratch dir) by its name.
        let shown = |path: &Path| match path.strip_prefix(repo_root()) {
            Ok(relative) => relative.display().to_string(),
            Err(_) => path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
        };
        let read = |path: &Path| {
            std::fs::read(path).map_err(|error| format!("{}: cannot read: {error}", path.display()))
        };
        let (a_bytes, b_bytes) = (read(a)?, read(b)?);
        if a.file_name() != b.file_name() {
            differences.push(format!("  {} vs {}: the names differ", shown(a), shown(b)));
        } else if a_bytes != b_bytes {
            let offset = a_bytes
                .iter()
                .zip(&b_bytes)
                .position(|(x, y)| x != y)
                .unwrap_or(a_bytes.len().min(b_bytes.len()));
            differences.push(format!(
                "  {} vs {}: sizes {} and {}, first differing byte at offset {offset}",
                shown(a),
                shown(b),
                a_bytes.len(),
                b_bytes.len()
            ));
        } else {
            println!(
                "verify-determinism: {} sha256 {} from both paths",
                shown(a),
                crate::generate::sha256_hex(&a_bytes)
            );
        }
    }
    if first.artifacts.len() != second.artifacts.len()
        || first.binaries.len() != second.binaries.len()
    {
        differences.push("  the two builds made different numbers of files".to_string());
    }
    Ok(differences)
}

/// The tree's files (tracked, and new ones git does not ignore) copied to
/// `target/repro/tree`; what was there before is removed, except the copy's
/// own `target/`, which keeps its build caches between runs.
fn copy_of_tree() -> Result<std::path::PathBuf> {
    let root = repo_root();
    let copy = crate::paths::target_dir().join("repro").join("tree");
    std::fs::create_dir_all(&copy).map_err(|error| format!("{}: {error}", copy.display()))?;
    for entry in std::fs::read_dir(&copy).map_err(|error| format!("{}: {error}", copy.display()))? {
        let entry = entry.map_err(|error| format!("{}: {error}", copy.display()))?;
        if entry.file_name() != "target" {
            let path = entry.path();
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed.map_err(|error| format!("{}: {error}", path.display()))?;
        }
    }
    let mut list = Command::new("git");
    list.current_dir(&root).args([
        "ls-files",
        "-z",
        "--cached",
        "--others",
        "--exclude-standard",
    ]);
    let listed = list
        .output()
        .map_err(|error| format!("could not start `{}`: {error}", describe(&list)))?;
    if !listed.status.success() {
        return Err(format!(
            "`{}` failed with {}",
            describe(&list),
            listed.status
        ));
    }
    for relative in listed
        .stdout
        .split(|&byte| byte == 0)
        .filter(|name| !name.is_empty())
    {
        let relative = String::from_utf8_lossy(relative).into_owned();
        let source = root.join(&relative);
        // A tracked file deleted in the working tree is not part of it.
        if source.is_file() {
            let target = copy.join(&relative);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|error| format!("{relative}: {error}"))?;
            }
            std::fs::copy(&source, &target).map_err(|error| format!("{relative}: {error}"))?;
        }
    }
    Ok(copy)
}

/// Compares two sets of outputs in memory, e.g. two renders.
#[cfg(test)]
pub fn compare_outputs(expected: &[Output], actual: &[Output]) -> Vec<String> {
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

/// Says where two versions of one generated file differ.
pub fn describe_difference(path: &str, expected: &[u8], actual: &[u8]) -> String {
    if path.ends_with(".tar.gz") {
        describe_tar_gz(expected, actual)
    } else {
        describe_text(expected, actual)
    }
}

fn describe_text(expected: &[u8], actual: &[u8]) -> String {
    let expected_text = String::from_utf8_lossy(expected);
    let actual_text = String::from_utf8_lossy(actual);
    let mut expected_lines = expected_text.split('\n');
    let mut actual_lines = actual_text.split('\n');
    let mut number = 1;
    loop {
        match (expected_lines.next(), actual_lines.next()) {
            (Some(a), Some(b)) if a == b => number += 1,
            (None, None) => return "differs only in bytes that are not text".to_string(),
            (a, b) => {
                return format!(
                    "line {number} differs: expected `{}`, found `{}`",
                    shorten(a.unwrap_or("<end of file>")),
                    shorten(b.unwrap_or("<end of file>"))
                )
            }
        }
    }
}

fn shorten(line: &str) -> String {
    const LIMIT: usize = 80;
    if line.chars().count() <= LIMIT {
        line.to_string()
    } else {
        format!("{}...", line.chars().take(LIMIT).collect::<String>())
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
    let mut fields = Vec::new();
    for (name, range) in GZIP_HEADER_FIELDS {
        let (a, b) = (expected.get(range.clone()), actual.get(range));
        if a != b {
            fields.push(format!("gzip header field {name} ({a:?} vs {b:?})"));
        }
    }
    if !fields.is_empty() {
        return fields.join("; ");
    }
    let (expected_tar, actual_tar) = match (gunzip(expected), gunzip(actual)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(error), _) => return format!("expected archive does not decompress: {error}"),
        (_, Err(error)) => return format!("archive does not decompress: {error}"),
    };
    if expected_tar == actual_tar {
        return "the compressed stream differs (same tar bytes): compression level or backend"
            .to_string();
    }
    let (expected_entries, actual_entries) =
        match (tar_entries(&expected_tar), tar_entries(&actual_tar)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(error), _) | (_, Err(error)) => return format!("tar does not parse: {error}"),
        };
    let mut differences = Vec::new();
    for (index, (a, b)) in expected_entries.iter().zip(&actual_entries).enumerate() {
        if a.path != b.path {
            differences.push(format!(
                "entry #{index}: field path (`{}` vs `{}`)",
                a.path, b.path
            ));
            continue;
        }
        for (field, left, right) in a
            .fields()
            .into_iter()
            .zip(b.fields())
            .map(|(l, r)| (l.0, l.1, r.1))
        {
            if left != right {
                differences.push(format!(
                    "entry `{}`: field {field} ({left} vs {right})",
                    a.path
                ));
            }
        }
    }
    if expected_entries.len() != actual_entries.len() {
        differences.push(format!(
            "entry count ({} vs {})",
            expected_entries.len(),
            actual_entries.len()
        ));
    }
    if differences.is_empty() {
        "tar bytes differ outside entry fields (padding, trailer or unparsed header bytes)"
            .to_string()
    } else {
        differences.join("; ")
    }
}

fn gunzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out)?;
    Ok(out)
}

/// The header fields and content of one tar entry, as comparable text.
struct TarEntry {
    path: String,
    mode: String,
    uid: String,
    gid: String,
    uname: String,
    gname: String,
    mtime: String,
    size: String,
    kind: String,
    content: Vec<u8>,
}

impl TarEntry {
    fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("mode", self.mode.clone()),
            ("uid", self.uid.clone()),
            ("gid", self.gid.clone()),
            ("uname", self.uname.clone()),
            ("gname", self.gname.clone()),
            ("mtime", self.mtime.clone()),
            ("size", self.size.clone()),
            ("type", self.kind.clone()),
            (
                "content",
                format!("sha256 {}", crate::generate::sha256_hex(&self.content)),
            ),
        ]
    }
}

fn tar_entries(bytes: &[u8]) -> std::io::Result<Vec<TarEntry>> {
    let mut archive = tar::Archive::new(bytes);
    let mut entries = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let header = entry.header().clone();
        let text = |value: std::io::Result<u64>| match value {
            Ok(number) => format!("{number:o}"),
            Err(error) => format!("unreadable ({error})"),
        };
        let name = |value: Option<&[u8]>| {
            value.map_or_else(
                || "<none>".to_string(),
                |bytes| format!("`{}`", String::from_utf8_lossy(bytes)),
            )
        };
        let mut content = Vec::new();
        entry.read_to_end(&mut content)?;
        entries.push(TarEntry {
            path: String::from_utf8_lossy(&entry.path_bytes()).into_owned(),
            mode: text(header.mode().map(u64::from)),
            uid: text(header.uid()),
            gid: text(header.gid()),
            uname: name(header.username_bytes()),
            gname: name(header.groupname_bytes()),
            mtime: header
                .mtime()
                .map_or_else(|error| format!("unreadable ({error})"), |t| t.to_string()),
            size: header
                .size()
                .map_or_else(|error| format!("unreadable ({error})"), |s| s.to_string()),
            kind: format!("{:?}", header.entry_type()),
            content,
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::tarball;

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
        let paths: Vec<_> = entries.iter().map(|entry| entry.path.as_str()).collect();
        assert_eq!(paths, ["top/a.rs", "top/b.rs"]);
        assert!(entries
            .iter()
            .all(|entry| entry.mode == "644" && entry.uid == "0"));
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
        let at = spec
            .windows(22)
            .position(|w| w == b"No libcuda.so.1 exists")
            .unwrap();
        spec[at] = b'n';
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
        let scratch = ScratchDir::new("determinism-test").unwrap();
        write_inputs(scratch.path(), &inputs, true).unwrap();
        let reread = Inputs::read(scratch.path()).unwrap();
        assert_eq!(reread, inputs);
        assert!(compare_outputs(&render(&inputs).unwrap(), &render(&reread).unwrap()).is_empty());
    }
}

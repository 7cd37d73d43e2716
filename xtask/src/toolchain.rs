//! The pinned Rust toolchain (rust-toolchain.toml) and its targets.
//!
//! rustup honours the file's `targets` only when it installs the toolchain
//! itself; a machine whose 1.95.0 came another way (a base image, a shared
//! toolchain) has the host target alone. Every build for another target
//! first calls [`ensure_pinned_targets`], which adds what is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths::{at, repo_root};
use crate::process::{output, run};
use crate::Result;

const TOOLCHAIN_FILE: &str = "rust-toolchain.toml";

/// rust-toolchain.toml's `[toolchain]` table: the one reader of the file.
pub struct PinnedToolchain {
    pub channel: String,
    /// The `targets` list, in its order.
    pub targets: Vec<String>,
}

/// Reads the `[toolchain]` table of rust-toolchain.toml's text (`path`
/// names it in errors): a `channel` string and a `targets` list of strings.
pub fn parse_pinned(path: &str, text: &str) -> Result<PinnedToolchain> {
    let document: toml_edit::DocumentMut = text
        .parse()
        .map_err(|error| format!("{path}: not TOML: {error}"))?;
    let toolchain = document
        .get("toolchain")
        .and_then(|item| item.as_table_like());
    let channel = toolchain
        .and_then(|toolchain| toolchain.get("channel"))
        .and_then(|channel| channel.as_str())
        .ok_or_else(|| format!("{path}: no [toolchain] channel"))?;
    let no_targets = || format!("{path}: no [toolchain] `targets` list of strings");
    let targets = toolchain
        .and_then(|toolchain| toolchain.get("targets"))
        .and_then(|targets| targets.as_array())
        .ok_or_else(no_targets)?;
    let targets: Option<Vec<String>> = targets
        .iter()
        .map(|target| target.as_str().map(str::to_owned))
        .collect();
    Ok(PinnedToolchain {
        channel: channel.to_owned(),
        targets: targets.ok_or_else(no_targets)?,
    })
}

/// The target list of rust-toolchain.toml's `[toolchain]` table, in its order.
pub fn pinned_targets(root: &Path) -> Result<Vec<String>> {
    let file = root.join(TOOLCHAIN_FILE);
    let text = std::fs::read_to_string(&file).map_err(at(&file))?;
    Ok(parse_pinned(TOOLCHAIN_FILE, &text)?.targets)
}

/// `rustup` in the repository root, where rust-toolchain.toml selects the
/// toolchain (RUSTUP_HOME as the environment sets it).
pub fn rustup() -> Command {
    let mut command = Command::new("rustup");
    command.current_dir(repo_root());
    command
}

/// The targets the pinned toolchain has installed.
fn installed_targets(rustup_home: Option<&Path>) -> Result<Vec<String>> {
    let mut list = rustup();
    if let Some(home) = rustup_home {
        list.env("RUSTUP_HOME", home);
    }
    let text = output(list.args(["target", "list", "--installed"]))?;
    Ok(text.lines().map(str::trim).map(str::to_owned).collect())
}

/// Adds every target rust-toolchain.toml names that the pinned toolchain
/// lacks (`rustup target add`, which installs the toolchain too if absent).
pub fn ensure_pinned_targets() -> Result<()> {
    ensure_targets_in(None)
}

/// [`ensure_pinned_targets`] for the rustup installation `rustup_home`
/// (None: the environment's).
fn ensure_targets_in(rustup_home: Option<&Path>) -> Result<()> {
    let installed = installed_targets(rustup_home)?;
    let pinned = pinned_targets(&repo_root())?;
    let missing: Vec<&String> = pinned.iter().filter(|t| !installed.contains(t)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    println!("toolchain: adding the pinned targets it lacks: {missing:?}");
    let mut add = rustup();
    if let Some(home) = rustup_home {
        add.env("RUSTUP_HOME", home);
    }
    run(add.args(["target", "add"]).args(missing))
}

/// The target the proof removes: the one `dist` cross-builds for.
const REMOVED_TARGET: &str = "aarch64-unknown-linux-gnu";

/// `cargo xtask test`'s proof that a fresh machine gets the pinned targets:
/// a throwaway rustup installation under target/ holding this toolchain
/// without `REMOVED_TARGET` (files hard-linked, rustup's own records
/// copied, the target then removed by rustup there); the same
/// [`ensure_targets_in`] that `dist` runs must add it back.
pub fn prove_missing_targets_are_added() -> Result<()> {
    let scratch = crate::paths::target_dir().join("fresh-rustup");
    let _ = std::fs::remove_dir_all(&scratch);
    // `<RUSTUP_HOME>/toolchains/<name>`.
    let toolchain = active_toolchain_dir()?;
    let name = toolchain.file_name().ok_or("the toolchain has no name")?;
    let home = toolchain.parent().and_then(Path::parent);
    let settings = home
        .ok_or("the toolchain is not in a rustup home")?
        .join("settings.toml");
    link_tree(&toolchain, &scratch.join("toolchains").join(name))?;
    let copied = scratch.join("settings.toml");
    std::fs::copy(&settings, &copied).map_err(at(&settings))?;
    if has_target(&scratch, REMOVED_TARGET)? {
        let mut remove = rustup();
        remove.env("RUSTUP_HOME", &scratch);
        run(remove.args(["target", "remove", REMOVED_TARGET]))?;
    }
    if has_target(&scratch, REMOVED_TARGET)? {
        let shown = scratch.display();
        return Err(format!("{REMOVED_TARGET} is still installed in {shown}"));
    }
    ensure_targets_in(Some(&scratch))?;
    let installed = installed_targets(Some(&scratch))?;
    let pinned = pinned_targets(&repo_root())?;
    let missing: Vec<&String> = pinned.iter().filter(|t| !installed.contains(t)).collect();
    std::fs::remove_dir_all(&scratch).map_err(at(&scratch))?;
    if !missing.is_empty() {
        return Err(format!(
            "after adding, the fresh toolchain still lacks {missing:?}"
        ));
    }
    Ok(())
}

/// Whether the pinned toolchain of the rustup home `home` has `target`.
fn has_target(home: &Path, target: &str) -> Result<bool> {
    let installed = installed_targets(Some(home))?;
    Ok(installed.iter().any(|installed| installed == target))
}

/// The directory of the toolchain rust-toolchain.toml selects
/// (`<RUSTUP_HOME>/toolchains/<name>`, perhaps a link), from `rustup which rustc`.
fn active_toolchain_dir() -> Result<PathBuf> {
    let rustc = output(rustup().args(["which", "rustc"]))?;
    let rustc = PathBuf::from(rustc.trim());
    let bin = rustc.parent().ok_or("rustc has no directory")?;
    let dir = bin.parent().ok_or("rustc's directory has no parent")?;
    Ok(dir.to_path_buf())
}

/// A copy of the toolchain tree `from` at `to` that cannot change `from`:
/// directories made anew, files hard-linked, except rustup's own records in
/// `lib/rustlib/` (the files directly in it), which rustup rewrites: those copied.
fn link_tree(from: &Path, to: &Path) -> Result<()> {
    // The toolchain's own directory may be a link (`1.95.0-...` -> `stable-...`).
    let from = &from.canonicalize().map_err(at(from))?;
    let records = from.join("lib/rustlib");
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.map_err(|error| format!("{}: {error}", from.display()))?;
        let relative = entry.path().strip_prefix(from).unwrap_or(entry.path());
        let target = to.join(relative);
        let kind = entry.file_type();
        if kind.is_dir() {
            std::fs::create_dir_all(&target).map_err(at(&target))?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(entry.path()).map_err(at(entry.path()))?;
            std::os::unix::fs::symlink(link, &target).map_err(at(&target))?;
        } else if entry.path().parent() == Some(records.as_path()) {
            std::fs::copy(entry.path(), &target).map_err(at(&target))?;
        } else {
            std::fs::hard_link(entry.path(), &target).map_err(at(&target))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_channel_and_the_target_list_of_the_toolchain_file() {
        let text =
            "[toolchain]\nchannel = \"1.95.0\"\n# x\ntargets = [\n    \"a-b\", # first\n    \
                    \"c-d\",\n]\n";
        let pinned = parse_pinned("t.toml", text).unwrap();
        assert_eq!(
            (pinned.channel.as_str(), pinned.targets),
            ("1.95.0", vec!["a-b".into(), "c-d".into()])
        );
        // Spelled as TOML allows, not only as the file spells it today.
        let inline = "toolchain = { channel = '1', targets = ['a', \"b\"] }\n";
        assert_eq!(parse_pinned("t.toml", inline).unwrap().targets, ["a", "b"]);
        let refused = |text: &str| parse_pinned("t.toml", text).err().unwrap();
        assert_eq!(
            refused("[toolchain]\ntargets = []\n"),
            "t.toml: no [toolchain] channel"
        );
        let no_list = "t.toml: no [toolchain] `targets` list of strings";
        assert_eq!(refused("[toolchain]\nchannel = \"1\"\n"), no_list);
        assert_eq!(
            refused("[toolchain]\nchannel = \"1\"\ntargets = [1]\n"),
            no_list
        );
        assert!(refused("[toolchain\n").starts_with("t.toml: not TOML"));
    }

    #[test]
    fn the_pinned_targets_hold_every_shipped_one() {
        let pinned = pinned_targets(&repo_root()).unwrap();
        for shipped in crate::native::SHIPPED_TARGETS {
            assert!(pinned.iter().any(|target| target == shipped), "{shipped}");
        }
    }
}

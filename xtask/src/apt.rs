//! Debian packages fetched, never installed: `apt-get download` under a
//! private apt configuration ([`PrivateApt`]) on the machine's own Debian
//! archive (same URI, same keyring), then `dpkg-deb -x`; what a step fetched
//! is kept in a manifest beside it ([`cached`]). Used by the real-driver and
//! the emulated steps.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{de::DeserializeOwned, Serialize};

use crate::paths::{at, regular_files};
use crate::{process, Result};

/// The manifest at `path` when `complete` accepts it; otherwise `fetch`'s,
/// written there. A failed fetch fails the `step`: it is never skipped.
pub fn cached<T: Serialize + DeserializeOwned>(
    path: &Path,
    what: &str,
    step: &str,
    complete: impl FnOnce(&T) -> bool,
    fetch: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let text = fs::read_to_string(path).unwrap_or_default();
    if let Some(value) = serde_json::from_str(&text).ok().filter(complete) {
        println!("{step}: reusing {what} cached in {}", path.display());
        return Ok(value);
    }
    let value = fetch().map_err(|why| {
        format!("{what} could not be fetched, so the {step} checks cannot run (they are never skipped): {why}")
    })?;
    let text = serde_json::to_string_pretty(&value).map_err(|error| error.to_string())?;
    fs::write(path, text).map_err(at(path))?;
    Ok(value)
}

/// Unpacks `deb` into a fresh `tree` with `dpkg-deb -x` (nothing installed).
pub fn unpack(deb: &Path, tree: &Path) -> Result<()> {
    let _ = fs::remove_dir_all(tree);
    fs::create_dir_all(tree).map_err(at(tree))?;
    process::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(tree))
}

/// An apt configuration of its own (`APT_CONFIG`): lists, caches and
/// sources in `<dir>/apt`, no dpkg status, no host source or preference.
pub struct PrivateApt {
    dir: PathBuf,
    /// The machine's release.
    pub release: String,
}

impl PrivateApt {
    /// One deb822 stanza on the machine's archive per `suites/components[/arch]`
    /// of `sources` (`{release}`: the machine's), `architecture` seen beside
    /// the machine's own; then `apt-get update`.
    pub fn new(dir: &Path, architecture: Option<&str>, sources: &[&str]) -> Result<Self> {
        let release = machine_release()?;
        let archive = machine_archive(&release)?;
        let stanza = |line: &&str| stanza(&archive, &line.replace("{release}", &release));
        let stanzas: Vec<String> = sources.iter().map(stanza).collect();
        let apt = dir.join("apt");
        fs::create_dir_all(apt.join("lists/partial")).map_err(at(&apt))?;
        let arch = architecture.map(|arch| format!("APT::Architectures:: \"{arch}\";\n"));
        let arch = arch.unwrap_or_default();
        // The download lands in target/, which apt's own unprivileged user
        // may not reach.
        let a = apt.display();
        let conf = format!(
            "Dir::State \"{a}\"; Dir::Cache \"{a}\"; Dir::State::status \"/dev/null\";\n\
             Dir::Etc::SourceList \"{a}/debian.sources\"; Dir::Etc::SourceParts \"/dev/null\";\n\
             Dir::Etc::Preferences \"/dev/null\"; Dir::Etc::PreferencesParts \"/dev/null\";\n\
             Acquire::Languages \"none\"; APT::Sandbox::User \"root\";\n{arch}"
        );
        for (file, text) in [("apt.conf", conf), ("debian.sources", stanzas.join("\n"))] {
            fs::write(apt.join(file), text).map_err(at(&apt.join(file)))?;
        }
        let apt = Self {
            dir: dir.to_path_buf(),
            release,
        };
        process::run(apt.command("apt-get").args(["-q", "update"]))?;
        Ok(apt)
    }

    /// The directory it keeps its configuration and downloads in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `program` (apt-get, apt-cache) under this configuration.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.env("APT_CONFIG", self.dir.join("apt/apt.conf"));
        command
    }

    /// Every `(version, suite)` offering `package`, newest first.
    pub fn offers(&self, package: &str) -> Result<Vec<(String, String)>> {
        let text = process::output(self.command("apt-cache").args(["madison", package]))?;
        Ok(madison_offers(&text, package))
    }

    /// The version of `package` that `suite` offers.
    pub fn version_in(&self, package: &str, suite: &str) -> Result<String> {
        let offers = self.offers(package)?;
        let found = offers.iter().find(|(_, offered_by)| offered_by == suite);
        let why = format!("the suite {suite} offers no {package} (offered: {offers:?})");
        found.map(|(version, _)| version.clone()).ok_or(why)
    }

    /// Downloads `package=version` into `<dir>/debs/<package>=<version>/`.
    pub fn download(&self, package: &str, version: &str) -> Result<PathBuf> {
        let spec = format!("{package}={version}");
        let into = self.dir.join("debs").join(&spec);
        fs::create_dir_all(&into).map_err(at(&into))?;
        let mut apt_get = self.command("apt-get");
        process::run(apt_get.current_dir(&into).args(["-q", "download", &spec]))?;
        match regular_files(&into, |_| false)?.as_slice() {
            [deb] if deb.extension().is_some_and(|ext| ext == "deb") => Ok(deb.clone()),
            found => Err(format!("apt-get download left {found:?}, not one .deb")),
        }
    }
}

/// `apt-cache madison` lines as `(version, suite)`:
/// `libcuda1:arm64 | 550.163.01-5.1 | http://... sid/non-free arm64 Packages`.
fn madison_offers(text: &str, package: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split('|').map(str::trim);
            let (name, version, source) = (fields.next()?, fields.next()?, fields.next()?);
            let suite = source.split_whitespace().nth(1)?.split('/').next()?;
            (name == package).then(|| (version.to_owned(), suite.to_owned()))
        })
        .collect()
}

/// The machine's Debian release (`VERSION_CODENAME` of /etc/os-release).
fn machine_release() -> Result<String> {
    let os_release = Path::new("/etc/os-release");
    fs::read_to_string(os_release)
        .map_err(at(os_release))?
        .lines()
        .find_map(|line| line.strip_prefix("VERSION_CODENAME="))
        .map(|value| value.trim_matches('"').to_owned())
        .filter(|value| !value.is_empty())
        .ok_or_else(|| "/etc/os-release names no VERSION_CODENAME (not Debian?)".to_string())
}

/// The URI of the archive the machine's own release comes from.
pub fn machine_archive_uri() -> Result<String> {
    Ok(machine_archive(&machine_release()?)?.0)
}

/// A Debian archive as one of the machine's sources names it: its URI and
/// keyring (`Signed-By`).
type Archive = (String, Option<String>);

/// The machine's own apt source offering its `release`.
fn machine_archive(release: &str) -> Result<Archive> {
    let listed = regular_files(Path::new("/etc/apt/sources.list.d"), |_| false);
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    files.extend(listed.unwrap_or_default());
    let found = files.iter().find_map(|file| {
        let text = fs::read_to_string(file).ok()?;
        match file.extension()?.to_str()? {
            "sources" => deb822_archive(&text, release),
            "list" => one_line_archive(&text, release),
            _ => None,
        }
    });
    found.ok_or(format!(
        "no apt source of this machine (/etc/apt/sources.list, /etc/apt/sources.list.d/) \
         offers the Debian suite `{release}`; the packages come from the machine's own archive"
    ))
}

/// One deb822 stanza on the machine's `archive` (same URI, same keyring)
/// from `suites/components[/architecture]` (words space-separated).
fn stanza((uri, keyring): &Archive, line: &str) -> String {
    let mut fields = line.split('/');
    let (suites, components) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
    let arch = fields.next().map(|arch| format!("Architectures: {arch}\n"));
    let keyring = keyring.as_ref().map(|key| format!("Signed-By: {key}\n"));
    let (arch, keyring) = (arch.unwrap_or_default(), keyring.unwrap_or_default());
    format!("Types: deb\nURIs: {uri}\nSuites: {suites}\nComponents: {components}\n{arch}{keyring}")
}

/// The first enabled `deb` stanza of a deb822 `.sources` file offering `suite`.
fn deb822_archive(text: &str, suite: &str) -> Option<Archive> {
    text.split("\n\n").find_map(|stanza| {
        let lines = stanza.lines().filter(|line| !line.starts_with('#'));
        let fields = lines.filter_map(|line| line.split_once(':'));
        let field = |name: &str| {
            let mut fields = fields.clone();
            let found = fields.find(|(key, _)| key.trim().eq_ignore_ascii_case(name));
            found.map_or("", |(_, value)| value.trim())
        };
        let has = |name, word| field(name).split_whitespace().any(|w| w == word);
        let enabled = !field("Enabled").eq_ignore_ascii_case("no");
        let uri = field("URIs").split_whitespace().next()?.to_owned();
        let keyring = Some(field("Signed-By")).filter(|value| !value.is_empty());
        let offered = enabled && has("Types", "deb") && has("Suites", suite);
        offered.then(|| (uri, keyring.map(str::to_owned)))
    })
}

/// The first `deb` line of a one-line `.list` file offering `suite`.
fn one_line_archive(text: &str, suite: &str) -> Option<Archive> {
    text.lines().find_map(|line| {
        let line = line.split('#').next()?.trim();
        let rest = line.strip_prefix("deb ")?.trim_start();
        let (options, rest) = match rest.strip_prefix('[') {
            Some(bracketed) => bracketed.split_once(']')?,
            None => ("", rest),
        };
        let mut words = rest.split_whitespace();
        let (uri, offered) = (words.next()?.to_owned(), words.next()?);
        let mut options = options.split_whitespace();
        let keyring = options.find_map(|option| option.strip_prefix("signed-by="));
        (offered == suite).then(|| (uri, keyring.map(str::to_owned)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_deb822_stanzas_and_skips_disabled_and_source_ones() {
        let skipped = "Types: deb-src\nURIs: http://src\nSuites: bookworm\nComponents: main\n\n\
                       Types: deb\nURIs: http://off\nSuites: bookworm\nComponents: main\n\
                       Enabled: no\n\n";
        let text = format!(
            "{skipped}Types: deb\n# comment\nURIs: http://deb.debian.org/debian\n\
             Suites: bookworm bookworm-updates\nComponents: main\n\
             Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        );
        let archive = (
            "http://deb.debian.org/debian".to_owned(),
            Some("/usr/share/keyrings/debian-archive-keyring.gpg".to_owned()),
        );
        assert_eq!(deb822_archive(&text, "bookworm"), Some(archive.clone()));
        assert_eq!(deb822_archive(&text, "bookworm-updates"), Some(archive));
        assert_eq!(deb822_archive(skipped, "bookworm"), None);
        assert_eq!(deb822_archive(&text, "sid"), None);
    }

    #[test]
    fn reads_one_line_sources_with_options() {
        let text = "# deb http://commented bookworm main\ndeb-src http://m/debian bookworm main\n\
                    deb [arch=amd64 signed-by=/k.gpg] http://m/debian bookworm main contrib\n\
                    deb http://m/sec bookworm-security main\n";
        let archive = one_line_archive(text, "bookworm");
        assert_eq!(
            archive,
            Some(("http://m/debian".into(), Some("/k.gpg".into())))
        );
        let archive = one_line_archive(text, "bookworm-security");
        assert_eq!(archive, Some(("http://m/sec".into(), None)));
        assert_eq!(one_line_archive(text, "sid"), None);
    }

    #[test]
    fn reads_madison_offers_with_their_suites() {
        let text = " qemu-user | 1:10.0.2+ds-2~bpo12+1 | http://m/debian bookworm-backports/main \
                    amd64 Packages\nlibcuda1:arm64 | 550.163.01-5.1 | http://m/debian \
                    sid/non-free arm64 Packages\n garbage\n";
        assert_eq!(
            madison_offers(text, "qemu-user"),
            [(
                "1:10.0.2+ds-2~bpo12+1".to_owned(),
                "bookworm-backports".to_owned()
            )]
        );
        assert_eq!(
            madison_offers(text, "libcuda1:arm64"),
            [("550.163.01-5.1".to_owned(), "sid".to_owned())]
        );
    }

    #[test]
    fn a_stanza_keeps_the_machines_uri_and_keyring() {
        let archive = ("http://m/debian".to_owned(), Some("/k.gpg".to_owned()));
        assert_eq!(
            stanza(&archive, "sid/non-free/arm64"),
            "Types: deb\nURIs: http://m/debian\nSuites: sid\nComponents: non-free\n\
             Architectures: arm64\nSigned-By: /k.gpg\n"
        );
        assert_eq!(
            stanza(
                &("http://m/debian".to_owned(), None),
                "bookworm sid/main non-free"
            ),
            "Types: deb\nURIs: http://m/debian\nSuites: bookworm sid\nComponents: main non-free\n"
        );
    }
}

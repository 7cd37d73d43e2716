//! `cargo xtask test`'s real-driver step: NVIDIA's own `libcuda1` (Debian
//! non-free), one image per driver series, run by the real probe, smoke and
//! preflight in private namespaces (tests/real_driver).
//!
//! The packages are fetched without installing anything: `apt-get download`
//! under a private apt configuration in `target/real-libcuda/apt/` whose one
//! source is the machine's own Debian archive entry (same URI, same keyring)
//! with the `non-free` component and the suites that carry the series added.
//! No host is added anywhere; nothing outside `target/` is written. Each
//! package is unpacked with `dpkg-deb -x`; the images and a manifest stay
//! cached under `target/real-libcuda/`. A series that cannot be fetched
//! fails the step, saying why; it is never skipped.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::paths::target_dir;
use crate::{process, python_env, Result};

/// The driver series checked, each the newest `libcuda1` of that series the
/// archive offers.
pub const SERIES: [&str; 3] = ["535", "550", "555"];

/// Suites added to the machine's own release to reach every series
/// (bookworm carries 535, sid 550, experimental 555).
const ADDED_SUITES: [&str; 2] = ["sid", "experimental"];
/// The component NVIDIA's driver lives in.
const NON_FREE: &str = "non-free";
const PACKAGE: &str = "libcuda1";
/// The package whose postinst (trigger) makes Debian's alternatives chain
/// `/usr/lib/<triplet>/libcuda.so.1` -> `/etc/alternatives/...` -> the image;
/// the platform-layout tests run that postinst in a private root.
const ALTERNATIVE_PACKAGE: &str = "nvidia-alternative";
/// The test tree that runs the probe, smoke and preflight against the images.
const TEST_DIR: &str = "tests/real_driver";

/// One fetched driver: its series, package version and extracted image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealDriver {
    pub series: String,
    pub package_version: String,
    /// The image's own version, `libcuda.so.<version>` (e.g. `550.163.01`).
    pub image_version: String,
    pub image: PathBuf,
    /// The `.deb` files themselves (`dpkg-deb -x` / `-e` by the tests).
    #[serde(default)]
    pub deb: PathBuf,
    #[serde(default)]
    pub alternative_deb: PathBuf,
}

fn cache_dir() -> PathBuf {
    target_dir().join("real-libcuda")
}

fn manifest_path() -> PathBuf {
    cache_dir().join("drivers.json")
}

/// `cargo xtask real-driver`: `setup` (the binaries, the wheel, the images),
/// then this step alone.
pub fn command(args: &[String]) -> Result<()> {
    crate::no_arguments("real-driver", args);
    python_env::setup(&crate::native::build(false)?)?;
    test()
}

/// Runs tests/real_driver against the images `setup` fetched.
pub fn test() -> Result<()> {
    python_env::Venv::Floor.mypy(&[&[TEST_DIR]])?;
    python_env::Venv::Floor.pytest(&[TEST_DIR])
}

/// The manifest of every series, fetching what the cache lacks.
pub fn ensure_drivers() -> Result<PathBuf> {
    let manifest = manifest_path();
    if let Some(drivers) = cached_drivers(&manifest) {
        println!(
            "real driver: reusing {} cached images ({})",
            drivers.len(),
            manifest.display()
        );
        return Ok(manifest);
    }
    let drivers = fetch_all().map_err(|why| {
        format!(
            "NVIDIA's libcuda1 could not be fetched, so the real-driver checks cannot run \
             (they are never skipped): {why}"
        )
    })?;
    let text = serde_json::to_string_pretty(&drivers).map_err(|error| error.to_string())?;
    fs::write(&manifest, text).map_err(|error| format!("{}: {error}", manifest.display()))?;
    Ok(manifest)
}

fn cached_drivers(manifest: &Path) -> Option<Vec<RealDriver>> {
    let text = fs::read_to_string(manifest).ok()?;
    let drivers: Vec<RealDriver> = serde_json::from_str(&text).ok()?;
    let complete = drivers.len() == SERIES.len()
        && SERIES
            .iter()
            .all(|series| drivers.iter().any(|driver| driver.series == *series))
        && drivers.iter().all(|driver| {
            driver.image.is_file() && driver.deb.is_file() && driver.alternative_deb.is_file()
        });
    complete.then_some(drivers)
}

fn fetch_all() -> Result<Vec<RealDriver>> {
    let (entry, codename) = machine_entry()?;
    let mut components = entry.components.clone();
    if !components.iter().any(|component| component == NON_FREE) {
        components.push(NON_FREE.to_owned());
    }
    let mut suites = vec![codename];
    suites.extend(ADDED_SUITES.iter().map(|suite| (*suite).to_owned()));
    let source = stanza(&entry, &suites, &components, None);
    let apt = PrivateApt::create(&cache_dir().join("apt"), &source, &[])?;
    apt.update()?;
    let available = apt.versions(PACKAGE)?;
    println!("real driver: the private apt configuration sees {PACKAGE} {available:?}");
    let downloads = cache_dir().join("debs");
    fs::create_dir_all(&downloads).map_err(|error| format!("{}: {error}", downloads.display()))?;
    SERIES
        .iter()
        .map(|series| {
            let version = newest_of_series(&available, series).ok_or_else(|| {
                format!("no {PACKAGE} of series {series} is offered (offered: {available:?})")
            })?;
            let deb = apt.download(PACKAGE, &version, &downloads)?;
            let alternative_deb = apt.download(ALTERNATIVE_PACKAGE, &version, &downloads)?;
            Ok(RealDriver {
                alternative_deb,
                ..extract(&cache_dir().join(series), series, &version, &deb)?
            })
        })
        .collect()
}

/// The newest version whose upstream part starts with `series.`; apt lists
/// versions newest first.
pub(crate) fn newest_of_series(available: &[String], series: &str) -> Option<String> {
    available
        .iter()
        .find(|version| version.starts_with(&format!("{series}.")))
        .cloned()
}

/// Unpacks the package into `tree` and finds its one regular
/// `libcuda.so.<version>`.
pub(crate) fn extract(
    tree: &Path,
    series: &str,
    package_version: &str,
    deb: &Path,
) -> Result<RealDriver> {
    unpack(deb, tree)?;
    let mut images = Vec::new();
    collect_images(tree, &mut images)?;
    let [image] = images.as_slice() else {
        return Err(format!(
            "{} holds {} regular libcuda.so.<version> files, not one",
            deb.display(),
            images.len()
        ));
    };
    let image_version = image
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| name.strip_prefix("libcuda.so."))
        .ok_or_else(|| format!("{} is not named libcuda.so.<version>", image.display()))?
        .to_owned();
    Ok(RealDriver {
        series: series.to_owned(),
        package_version: package_version.to_owned(),
        image_version,
        image: image.clone(),
        deb: deb.to_path_buf(),
        alternative_deb: PathBuf::new(),
    })
}

/// Unpacks `deb` into a fresh `tree` with `dpkg-deb -x` (nothing installed).
pub(crate) fn unpack(deb: &Path, tree: &Path) -> Result<()> {
    if tree.exists() {
        fs::remove_dir_all(tree).map_err(|error| format!("{}: {error}", tree.display()))?;
    }
    fs::create_dir_all(tree).map_err(|error| format!("{}: {error}", tree.display()))?;
    process::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(tree))
}

fn collect_images(directory: &Path, images: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        fs::read_dir(directory).map_err(|error| format!("{}: {error}", directory.display()))?;
    for entry in entries {
        let entry = entry.map_err(|error| format!("{}: {error}", directory.display()))?;
        let kind = entry
            .file_type()
            .map_err(|error| format!("{}: {error}", entry.path().display()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if kind.is_dir() {
            collect_images(&entry.path(), images)?;
        } else if kind.is_file()
            && name
                .strip_prefix("libcuda.so.")
                .is_some_and(|version| version.contains('.'))
        {
            images.push(entry.path());
        }
    }
    Ok(())
}

/// An apt configuration of its own: state, cache and sources under `dir`,
/// seeing `architectures` beside the machine's own.
pub(crate) struct PrivateApt {
    dir: PathBuf,
    architectures: Vec<String>,
}

impl PrivateApt {
    pub(crate) fn create(dir: &Path, source: &str, architectures: &[&str]) -> Result<Self> {
        for sub in [
            "state/lists/partial",
            "cache/archives/partial",
            "sources.list.d",
            "preferences.d",
        ] {
            let path = dir.join(sub);
            fs::create_dir_all(&path).map_err(|error| format!("{}: {error}", path.display()))?;
        }
        let writes = [
            (dir.join("state/status"), String::new()),
            (dir.join("sources.list"), String::new()),
            (dir.join("sources.list.d/debian.sources"), source.to_owned()),
        ];
        for (path, text) in writes {
            fs::write(&path, text).map_err(|error| format!("{}: {error}", path.display()))?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            architectures: architectures
                .iter()
                .map(|arch| (*arch).to_owned())
                .collect(),
        })
    }

    /// `program` with every directory apt reads or writes pointed inside.
    fn command(&self, program: &str) -> Command {
        let dir = &self.dir;
        let mut command = Command::new(program);
        for (key, value) in [
            ("Dir::State", dir.join("state")),
            ("Dir::State::status", dir.join("state/status")),
            ("Dir::Cache", dir.join("cache")),
            ("Dir::Etc::SourceList", dir.join("sources.list")),
            ("Dir::Etc::SourceParts", dir.join("sources.list.d")),
            ("Dir::Etc::Preferences", dir.join("preferences")),
            ("Dir::Etc::PreferencesParts", dir.join("preferences.d")),
        ] {
            command.arg("-o").arg(format!("{key}={}", value.display()));
        }
        command.args([
            "-o",
            "Acquire::Languages=none",
            // The download lands in target/, which apt's own unprivileged
            // user may not reach.
            "-o",
            "APT::Sandbox::User=root",
        ]);
        for arch in &self.architectures {
            command
                .arg("-o")
                .arg(format!("APT::Architectures::={arch}"));
        }
        command
    }

    pub(crate) fn update(&self) -> Result<()> {
        process::run(self.command("apt-get").args(["-q", "update"]))
    }

    /// Every version of `package` the configuration sees, newest first.
    pub(crate) fn versions(&self, package: &str) -> Result<Vec<String>> {
        let mut versions: Vec<String> = Vec::new();
        for (version, _suite) in self.offers(package)? {
            if !versions.contains(&version) {
                versions.push(version);
            }
        }
        Ok(versions)
    }

    /// The version of `package` that `suite` offers.
    pub(crate) fn version_in(&self, package: &str, suite: &str) -> Result<String> {
        let offers = self.offers(package)?;
        offers
            .iter()
            .find(|(_, offered_by)| offered_by == suite)
            .map(|(version, _)| version.clone())
            .ok_or_else(|| format!("the suite {suite} offers no {package} (offered: {offers:?})"))
    }

    /// Every `(version, suite)` offering `package`, newest first.
    fn offers(&self, package: &str) -> Result<Vec<(String, String)>> {
        let mut command = self.command("apt-cache");
        command.args(["madison", package]);
        let shown = process::describe(&command);
        let output = command
            .output()
            .map_err(|error| format!("could not start `{shown}`: {error}"))?;
        if !output.status.success() {
            return Err(format!("`{shown}` failed with {}", output.status));
        }
        Ok(madison_offers(
            &String::from_utf8_lossy(&output.stdout),
            package,
        ))
    }

    /// Downloads `package=version` into `into`; returns the `.deb`.
    pub(crate) fn download(&self, package: &str, version: &str, into: &Path) -> Result<PathBuf> {
        process::run(self.command("apt-get").current_dir(into).args([
            "-q",
            "download",
            &format!("{package}={version}"),
        ]))?;
        // apt writes `:` in an epoch as `%3a`; the file name has no `:arch`.
        let file_version = version.replace(':', "%3a");
        let name = package.split(':').next().unwrap_or(package);
        let prefix = format!("{name}_{file_version}_");
        let entries = fs::read_dir(into).map_err(|error| format!("{}: {error}", into.display()))?;
        entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .find(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with(&prefix) && name.ends_with(".deb"))
            })
            .ok_or_else(|| format!("apt-get download left no {prefix}*.deb"))
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

/// The machine's own Debian archive entry (URI, keyring) and release codename.
pub(crate) fn machine_entry() -> Result<(SourceEntry, String)> {
    let codename = os_codename()?;
    let mut texts = Vec::new();
    for file in source_files()? {
        if let Ok(text) = fs::read_to_string(&file) {
            texts.push((file, text));
        }
    }
    let entry = texts
        .iter()
        .find_map(|(file, text)| {
            let entries = if file.extension().is_some_and(|ext| ext == "sources") {
                deb822_entries(text)
            } else {
                one_line_entries(text)
            };
            entries
                .into_iter()
                .find(|entry| entry.suites.contains(&codename))
        })
        .ok_or_else(|| {
            format!(
                "no apt source of this machine (/etc/apt/sources.list, \
                 /etc/apt/sources.list.d/) offers the Debian suite `{codename}`; the real-driver \
                 packages come from the machine's own Debian archive"
            )
        })?;
    Ok((entry, codename))
}

/// One deb822 stanza on the machine's archive `entry` (same URI, same
/// keyring), for `architectures` only when given.
pub(crate) fn stanza(
    entry: &SourceEntry,
    suites: &[String],
    components: &[String],
    architectures: Option<&str>,
) -> String {
    let mut stanza = format!(
        "Types: deb\nURIs: {}\nSuites: {}\nComponents: {}\n",
        entry.uri,
        suites.join(" "),
        components.join(" ")
    );
    if let Some(architectures) = architectures {
        stanza.push_str(&format!("Architectures: {architectures}\n"));
    }
    if let Some(keyring) = &entry.signed_by {
        stanza.push_str(&format!("Signed-By: {keyring}\n"));
    }
    stanza
}

fn os_codename() -> Result<String> {
    let text = fs::read_to_string("/etc/os-release")
        .map_err(|error| format!("/etc/os-release: {error}"))?;
    text.lines()
        .find_map(|line| line.strip_prefix("VERSION_CODENAME="))
        .map(|value| value.trim_matches('"').to_owned())
        .filter(|value| !value.is_empty())
        .ok_or_else(|| "/etc/os-release names no VERSION_CODENAME (not Debian?)".to_owned())
}

fn source_files() -> Result<Vec<PathBuf>> {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(entries) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut parts: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| {
                path.extension()
                    .is_some_and(|ext| ext == "sources" || ext == "list")
            })
            .collect();
        parts.sort();
        files.extend(parts);
    }
    Ok(files)
}

/// One `deb` source: its first URI, suites, components and keyring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceEntry {
    uri: String,
    suites: Vec<String>,
    components: Vec<String>,
    signed_by: Option<String>,
}

/// The enabled `deb` stanzas of a deb822 `.sources` file.
fn deb822_entries(text: &str) -> Vec<SourceEntry> {
    text.split("\n\n")
        .filter_map(|stanza| {
            let field = |name: &str| {
                stanza
                    .lines()
                    .filter(|line| !line.starts_with('#'))
                    .find_map(|line| {
                        let (key, value) = line.split_once(':')?;
                        key.trim()
                            .eq_ignore_ascii_case(name)
                            .then(|| value.trim().to_owned())
                    })
            };
            let words = |value: Option<String>| -> Vec<String> {
                value
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect()
            };
            if !words(field("Types")).iter().any(|kind| kind == "deb") {
                return None;
            }
            if field("Enabled").is_some_and(|value| value.eq_ignore_ascii_case("no")) {
                return None;
            }
            Some(SourceEntry {
                uri: words(field("URIs")).into_iter().next()?,
                suites: words(field("Suites")),
                components: words(field("Components")),
                signed_by: field("Signed-By").filter(|value| !value.is_empty()),
            })
        })
        .collect()
}

/// The `deb` lines of a one-line `.list` file.
fn one_line_entries(text: &str) -> Vec<SourceEntry> {
    text.lines()
        .filter_map(|line| {
            let line = line.split('#').next()?.trim();
            let rest = line.strip_prefix("deb ")?;
            let (options, rest) = match rest.trim_start().strip_prefix('[') {
                Some(bracketed) => bracketed.split_once(']')?,
                None => ("", rest),
            };
            let mut words = rest.split_whitespace();
            let uri = words.next()?.to_owned();
            let suite = words.next()?.to_owned();
            let signed_by = options
                .split_whitespace()
                .find_map(|option| option.strip_prefix("signed-by="))
                .map(str::to_owned);
            Some(SourceEntry {
                uri,
                suites: vec![suite],
                components: words.map(str::to_owned).collect(),
                signed_by,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_deb822_stanzas_and_skips_disabled_and_source_ones() {
        let text = "Types: deb\n# comment\nURIs: http://deb.debian.org/debian\n\
                    Suites: bookworm bookworm-updates\nComponents: main\n\
                    Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n\
                    Types: deb-src\nURIs: http://src\nSuites: bookworm\nComponents: main\n\n\
                    Types: deb\nURIs: http://off\nSuites: bookworm\nComponents: main\nEnabled: no\n";
        assert_eq!(
            deb822_entries(text),
            [SourceEntry {
                uri: "http://deb.debian.org/debian".into(),
                suites: vec!["bookworm".into(), "bookworm-updates".into()],
                components: vec!["main".into()],
                signed_by: Some("/usr/share/keyrings/debian-archive-keyring.gpg".into()),
            }]
        );
    }

    #[test]
    fn reads_one_line_sources_with_options() {
        let text = "# x\ndeb [arch=amd64 signed-by=/k.gpg] http://m/debian bookworm main contrib\n\
                    deb-src http://m/debian bookworm main\ndeb http://m/sec bookworm-security main\n";
        let entries = one_line_entries(text);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].uri, "http://m/debian");
        assert_eq!(entries[0].suites, ["bookworm"]);
        assert_eq!(entries[0].components, ["main", "contrib"]);
        assert_eq!(entries[0].signed_by.as_deref(), Some("/k.gpg"));
        assert_eq!(entries[1].signed_by, None);
    }

    #[test]
    fn picks_the_newest_version_of_each_series() {
        let offered = [
            "555.58.02-4".to_owned(),
            "550.163.01-5.1".to_owned(),
            "550.90.07-1".to_owned(),
            "535.261.03-1".to_owned(),
        ];
        assert_eq!(
            newest_of_series(&offered, "550").as_deref(),
            Some("550.163.01-5.1")
        );
        assert_eq!(newest_of_series(&offered, "53"), None);
        assert_eq!(newest_of_series(&offered, "470"), None);
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
        let entry = SourceEntry {
            uri: "http://m/debian".into(),
            suites: vec!["bookworm".into()],
            components: vec!["main".into()],
            signed_by: Some("/k.gpg".into()),
        };
        assert_eq!(
            stanza(&entry, &["sid".into()], &["non-free".into()], Some("arm64")),
            "Types: deb\nURIs: http://m/debian\nSuites: sid\nComponents: non-free\n\
             Architectures: arm64\nSigned-By: /k.gpg\n"
        );
    }
}

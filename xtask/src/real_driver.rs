//! `cargo xtask test`'s real-driver step: NVIDIA's own `libcuda1` (Debian
//! non-free), one image per driver series, run by the real probe, smoke and
//! preflight in private namespaces (tests/real_driver). Nothing is installed
//! and no host added: `apt-get download` under a private apt configuration
//! ([`PrivateApt`], shared with the emulated step) on the machine's own
//! Debian archive (same URI, same keyring), then `dpkg-deb -x`, all cached
//! under `target/real-libcuda/`. A series that cannot be fetched fails the
//! step, saying why; it is never skipped.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::paths::{at, regular_files, target_dir};
use crate::{process, python_env, Result};

/// The driver series checked, each the newest `libcuda1` of that series the
/// archive offers (bookworm carries 535, sid 550, experimental 555).
pub const SERIES: [&str; 3] = ["535", "550", "555"];
/// The package whose postinst (trigger) makes Debian's alternatives chain
/// `/usr/lib/<triplet>/libcuda.so.1` -> `/etc/alternatives/...` -> the image;
/// the platform-layout tests run that postinst in a private root.
const ALTERNATIVE_PACKAGE: &str = "nvidia-alternative";
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
    pub deb: PathBuf,
    pub alternative_deb: PathBuf,
}

/// `cargo xtask real-driver`: `setup` (it fetches the images), then this step alone.
pub fn command() -> Result<()> {
    python_env::setup()?;
    test()
}

/// Runs tests/real_driver against the images `setup` fetched.
pub fn test() -> Result<()> {
    python_env::Venv::Floor.mypy(&[&[TEST_DIR]])?;
    python_env::Venv::Floor.pytest(&[TEST_DIR])
}

/// The manifest of every series, fetching what the cache lacks.
pub fn ensure_drivers() -> Result<PathBuf> {
    let dir = target_dir().join("real-libcuda");
    let manifest = dir.join("drivers.json");
    let complete = |drivers: &Vec<RealDriver>| {
        let series = drivers.iter().map(|driver| driver.series.as_str());
        series.eq(SERIES)
            && drivers.iter().all(|driver| {
                let files = [&driver.image, &driver.deb, &driver.alternative_deb];
                files.iter().all(|file| file.is_file())
            })
    };
    let what = "NVIDIA's libcuda1";
    cached(&manifest, what, "real-driver", complete, || fetch(&dir))?;
    Ok(manifest)
}

fn fetch(dir: &Path) -> Result<Vec<RealDriver>> {
    let apt = PrivateApt::new(dir, None, &["{release} sid experimental/non-free"])?;
    let mut drivers = apt.drivers("libcuda1", &SERIES)?;
    for driver in &mut drivers {
        driver.alternative_deb = apt.download(ALTERNATIVE_PACKAGE, &driver.package_version)?;
    }
    Ok(drivers)
}

/// The manifest at `path` when `complete` accepts it; otherwise `fetch`'s,
/// written there. A failed fetch fails the `step`: it is never skipped.
pub(crate) fn cached<T: Serialize + DeserializeOwned>(
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

/// The newest version whose upstream part starts with `series.`; apt lists
/// versions newest first.
fn newest_of_series(available: &[String], series: &str) -> Option<String> {
    let prefix = format!("{series}.");
    available.iter().find(|v| v.starts_with(&prefix)).cloned()
}

/// Unpacks `deb` into a fresh `tree` with `dpkg-deb -x` (nothing installed).
pub(crate) fn unpack(deb: &Path, tree: &Path) -> Result<()> {
    let _ = fs::remove_dir_all(tree);
    fs::create_dir_all(tree).map_err(at(tree))?;
    process::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(tree))
}

/// An apt configuration of its own (`APT_CONFIG`): lists, caches and
/// sources in `<dir>/apt`, no dpkg status, no host source or preference.
pub(crate) struct PrivateApt {
    dir: PathBuf,
    /// The machine's release.
    pub(crate) release: String,
}

impl PrivateApt {
    /// One deb822 stanza on the machine's archive per `suites/components[/arch]`
    /// of `sources` (`{release}`: the machine's), `architecture` seen beside
    /// the machine's own; then `apt-get update`.
    pub(crate) fn new(dir: &Path, architecture: Option<&str>, sources: &[&str]) -> Result<Self> {
        let os_release = Path::new("/etc/os-release");
        let release = fs::read_to_string(os_release)
            .map_err(at(os_release))?
            .lines()
            .find_map(|line| line.strip_prefix("VERSION_CODENAME="))
            .map(|value| value.trim_matches('"').to_owned())
            .filter(|value| !value.is_empty())
            .ok_or("/etc/os-release names no VERSION_CODENAME (not Debian?)")?;
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

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.env("APT_CONFIG", self.dir.join("apt/apt.conf"));
        command
    }

    /// Every `(version, suite)` offering `package`, newest first.
    fn offers(&self, package: &str) -> Result<Vec<(String, String)>> {
        let text = process::output(self.command("apt-cache").args(["madison", package]))?;
        Ok(madison_offers(&text, package))
    }

    /// The version of `package` that `suite` offers.
    pub(crate) fn version_in(&self, package: &str, suite: &str) -> Result<String> {
        let offers = self.offers(package)?;
        let found = offers.iter().find(|(_, offered_by)| offered_by == suite);
        let why = format!("the suite {suite} offers no {package} (offered: {offers:?})");
        found.map(|(version, _)| version.clone()).ok_or(why)
    }

    /// Downloads `package=version` into `<dir>/debs/<package>=<version>/`.
    pub(crate) fn download(&self, package: &str, version: &str) -> Result<PathBuf> {
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

    /// The newest `package` of each of `series`, unpacked into
    /// `<dir>/<package>-<series>`, with its one regular `libcuda.so.<version>`.
    pub(crate) fn drivers(&self, package: &str, series: &[&str]) -> Result<Vec<RealDriver>> {
        let offered: Vec<String> = self.offers(package)?.into_iter().map(|(v, _)| v).collect();
        let driver = |series: &str| {
            let why = format!("no {package} of series {series} is offered ({offered:?})");
            let version = newest_of_series(&offered, series).ok_or(why)?;
            let name = format!("{package}-{series}").replace(':', "-");
            let tree = self.dir.join(name);
            let deb = self.download(package, &version)?;
            unpack(&deb, &tree)?;
            let version_of = |path: &Path| {
                let name = path.file_name()?.to_str()?.strip_prefix("libcuda.so.")?;
                name.contains('.').then(|| name.to_owned())
            };
            let files = regular_files(&tree, |_| true)?.into_iter();
            let images: Vec<_> = files.filter_map(|f| Some((version_of(&f)?, f))).collect();
            let [(image_version, image)] = images.as_slice() else {
                let (shown, found) = (deb.display(), images.len());
                return Err(format!(
                    "{shown} holds {found} regular libcuda.so.<version> files, not one"
                ));
            };
            Ok(RealDriver {
                series: series.to_owned(),
                package_version: version,
                image_version: image_version.clone(),
                image: image.clone(),
                deb,
                alternative_deb: PathBuf::new(),
            })
        };
        series.iter().map(|series| driver(series)).collect()
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

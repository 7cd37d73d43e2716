//! `cargo xtask test`'s real-driver step: NVIDIA's own `libcuda1` (Debian
//! non-free), one image per driver series, run by the real probe, smoke and
//! preflight in private namespaces (tests/real_driver). Nothing is installed
//! and no host added: the packages are fetched and unpacked by [`crate::apt`],
//! all cached under `target/real-libcuda/`. A series that cannot be fetched fails the
//! step, saying why; it is never skipped.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::apt::{cached, unpack, PrivateApt};
use crate::paths::{regular_files, target_dir};
use crate::{python_env, Result};

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
    let mut drivers = fetch_series(&apt, "libcuda1", &SERIES)?;
    for driver in &mut drivers {
        driver.alternative_deb = apt.download(ALTERNATIVE_PACKAGE, &driver.package_version)?;
    }
    Ok(drivers)
}

/// The newest `package` of each of `series`, unpacked into
/// `<dir>/<package>-<series>`, with its one regular `libcuda.so.<version>`.
pub fn fetch_series(apt: &PrivateApt, package: &str, series: &[&str]) -> Result<Vec<RealDriver>> {
    let offered: Vec<String> = apt.offers(package)?.into_iter().map(|(v, _)| v).collect();
    let driver = |series: &str| {
        let why = format!("no {package} of series {series} is offered ({offered:?})");
        let version = newest_of_series(&offered, series).ok_or(why)?;
        let name = format!("{package}-{series}").replace(':', "-");
        let tree = apt.dir().join(name);
        let deb = apt.download(package, &version)?;
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

/// The newest version whose upstream part starts with `series.`; apt lists
/// versions newest first.
fn newest_of_series(available: &[String], series: &str) -> Option<String> {
    let prefix = format!("{series}.");
    available.iter().find(|v| v.starts_with(&prefix)).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

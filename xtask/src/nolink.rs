//! Proof that a built binary links to no cuda/nvcuda: the dynamic section of
//! an ELF file names no CUDA library. The scan of the sources and the
//! cdylib check are `nolink_sources`, run by `cargo test`.

use std::path::Path;

use object::read::elf::{ElfFile, FileHeader};
use object::Endianness;

use crate::paths::at;
use crate::Result;

/// Fails when the ELF file at `path` names a CUDA library as a dependency.
pub fn check_dynamic_section(path: &Path) -> Result<()> {
    let needed = needed_libraries(path)?;
    let is_cuda = |name: &&String| name.to_ascii_lowercase().contains("cuda");
    let cuda: Vec<_> = needed.iter().filter(is_cuda).collect();
    let shown = path.display();
    let refusal = format!("{shown} links to a CUDA library: DT_NEEDED {cuda:?} (all: {needed:?})");
    cuda.is_empty().then_some(()).ok_or(refusal)?;
    println!("nolink: {shown} needs only {needed:?}");
    Ok(())
}

/// The `DT_NEEDED` entries of an ELF file, read by `object`.
pub fn needed_libraries(path: &Path) -> Result<Vec<String>> {
    let data = std::fs::read(path).map_err(at(path))?;
    let needed = match object::FileKind::parse(&*data) {
        Ok(object::FileKind::Elf64) => needed_in::<object::elf::FileHeader64<Endianness>>(&data),
        Ok(object::FileKind::Elf32) => needed_in::<object::elf::FileHeader32<Endianness>>(&data),
        Ok(kind) => return Err(format!("{}: not an ELF file ({kind:?})", path.display())),
        Err(why) => return Err(format!("{}: not an ELF file: {why}", path.display())),
    };
    needed.map_err(|why| format!("{}: an ELF file object cannot read: {why}", path.display()))
}

fn needed_in<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
) -> object::read::Result<Vec<String>> {
    let file = ElfFile::<Elf>::parse(data)?;
    let table = file
        .elf_section_table()
        .dynamic_table(file.endian(), data)?;
    let needed = table
        .iter()
        .filter(|entry| entry.tag == object::elf::DT_NEEDED);
    let name = |entry| Ok(String::from_utf8_lossy(table.string(entry)?).into_owned());
    needed.map(name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::scratch;

    #[test]
    #[cfg(target_os = "linux")]
    fn dynamic_section_of_a_real_binary_is_read() {
        // This test binary is a real dynamically linked ELF that needs libc.
        let exe = std::env::current_exe().unwrap();
        let needed = needed_libraries(&exe).unwrap();
        assert!(
            needed.iter().any(|name| name.starts_with("libc.so")),
            "{needed:?}"
        );
        check_dynamic_section(&exe).unwrap();
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_library_that_needs_libcuda_is_refused() {
        // A real ELF whose DT_NEEDED names libcuda.so.1, linked by the C compiler.
        let scratch = scratch("nolink-needs-cuda").unwrap();
        let dir = scratch.path();
        std::fs::write(dir.join("empty.c"), "int rextio_unused;\n").unwrap();
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let link = |args: &[&str]| {
            let status = std::process::Command::new(&cc)
                .current_dir(dir)
                .args(args)
                .status()
                .unwrap();
            assert!(status.success(), "{args:?}");
        };
        link(&[
            "-shared",
            "-o",
            "libcuda.so",
            "-Wl,-soname,libcuda.so.1",
            "empty.c",
        ]);
        link(&[
            "-shared",
            "-o",
            "user.so",
            "empty.c",
            "-Wl,--no-as-needed",
            "-L.",
            "-lcuda",
        ]);
        let user = dir.join("user.so");
        assert!(needed_libraries(&user)
            .unwrap()
            .contains(&"libcuda.so.1".to_string()));
        let error = check_dynamic_section(&user).unwrap_err();
        assert!(error.contains("DT_NEEDED [\"libcuda.so.1\"]"), "{error}");
    }

    #[test]
    fn non_elf_files_are_refused_clearly() {
        let scratch = scratch("nolink-not-elf").unwrap();
        let refusal = |name: &str, bytes: &[u8]| {
            let path = scratch.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            needed_libraries(&path).unwrap_err()
        };
        let pe = refusal("pe.exe", b"MZ\x90\x00");
        assert!(pe.contains("not an ELF file"), "{pe}");
        assert!(refusal("script", b"#!/bin/sh\n").contains("not an ELF file"));
        let truncated = refusal("truncated", b"\x7fELF\x02\x01");
        assert!(truncated.contains("ELF"), "{truncated}");
    }
}

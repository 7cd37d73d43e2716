//! Why an existing driver candidate was refused: one variant per check of
//! the reviewed walk, each naming its rule (docs/interfaces.md gives every
//! rule its reason). Plain data on every target, so a
//! [`LoadError`](crate::LoadError) can carry it anywhere.

/// Why an existing candidate was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// A link dangles, loops or passes the link limit (40, the kernel's own),
    /// or a component cannot be opened or inspected.
    Unresolvable,
    /// The resolved path is not strictly below a reviewed root and the floor.
    OutsideReviewedRoots,
    /// The resolved file is not a regular file (a directory, FIFO, device...).
    NotRegularFile,
    /// The image is not owned by root.
    ImageNotOwnedByRoot,
    /// The image has a group or other write bit.
    ImageWritableByOthers,
    /// The image has more than one hard link.
    ImageHasOtherLinks,
    /// A directory walked, or a link followed, is not owned by root.
    AncestorNotOwnedByRoot,
    /// A directory walked has a group or other write bit and is not both
    /// sticky and root-owned.
    AncestorWritableByOthers,
    /// A directory walked is group- or other-writable (sticky and root's),
    /// and the entry below it is not owned by root.
    EntryBelowWritableDirectoryNotOwnedByRoot,
}

impl Rejection {
    /// The loader rule that refused the image (docs/interfaces.md gives each
    /// rule its reason), as the probe's stderr and the remedy name it.
    pub fn rule(&self) -> &'static str {
        match self {
            Self::Unresolvable => "resolution",
            Self::OutsideReviewedRoots => "location",
            Self::NotRegularFile => "regular-file",
            Self::ImageNotOwnedByRoot | Self::AncestorNotOwnedByRoot => "owner",
            Self::ImageWritableByOthers => "mode",
            Self::AncestorWritableByOthers | Self::EntryBelowWritableDirectoryNotOwnedByRoot => {
                "writable-directory"
            }
            Self::ImageHasOtherLinks => "links",
        }
    }

    /// One plain sentence for a person reading the probe's stderr.
    pub fn explanation(&self) -> &'static str {
        match self {
            Self::Unresolvable => {
                "the path cannot be resolved (dangling link, loop, too many links or no access)"
            }
            Self::OutsideReviewedRoots => {
                "it resolves outside the reviewed driver directories \
                 (and outside driver_root, when set)"
            }
            Self::NotRegularFile => "it is not a regular file",
            Self::ImageNotOwnedByRoot => "the image is not owned by root",
            Self::ImageWritableByOthers => "the image is writable by group or others",
            Self::ImageHasOtherLinks => {
                "the image has more than one hard link on a writable mount \
                 (a second link passes only on a read-only mount)"
            }
            Self::AncestorNotOwnedByRoot => {
                "a directory above it, or a link on its way, is not owned by root"
            }
            Self::AncestorWritableByOthers => {
                "a directory on its way is writable by group or others and not both sticky \
                 and owned by root"
            }
            Self::EntryBelowWritableDirectoryNotOwnedByRoot => {
                "a directory on its way is writable by group or others (sticky, owned by \
                 root), but the entry below it is not owned by root"
            }
        }
    }
}

impl Rejection {
    /// Every rejection, in declaration order.
    pub const ALL: [Self; 9] = [
        Self::Unresolvable,
        Self::OutsideReviewedRoots,
        Self::NotRegularFile,
        Self::ImageNotOwnedByRoot,
        Self::ImageWritableByOthers,
        Self::ImageHasOtherLinks,
        Self::AncestorNotOwnedByRoot,
        Self::AncestorWritableByOthers,
        Self::EntryBelowWritableDirectoryNotOwnedByRoot,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rejection_names_its_rule() {
        let rules = [
            (Rejection::Unresolvable, "resolution"),
            (Rejection::OutsideReviewedRoots, "location"),
            (Rejection::NotRegularFile, "regular-file"),
            (Rejection::ImageNotOwnedByRoot, "owner"),
            (Rejection::ImageWritableByOthers, "mode"),
            (Rejection::ImageHasOtherLinks, "links"),
            (Rejection::AncestorNotOwnedByRoot, "owner"),
            (Rejection::AncestorWritableByOthers, "writable-directory"),
            (
                Rejection::EntryBelowWritableDirectoryNotOwnedByRoot,
                "writable-directory",
            ),
        ];
        assert_eq!(rules.map(|(rejection, _)| rejection), Rejection::ALL);
        for (rejection, rule) in rules {
            assert_eq!(rejection.rule(), rule);
            assert!(!rejection.explanation().is_empty());
        }
    }
}

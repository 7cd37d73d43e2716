//! Why an existing driver candidate was refused: one variant per check of
//! the reviewed walk, each naming its rule (docs/interfaces.md gives every
//! rule its reason). Plain data on every target, so a
//! [`LoadError`](crate::LoadError) can carry it anywhere.

use crate::generated::rules;

/// Defines [`Rejection`] from one list of its variants, each with the rule
/// (a generated constant of `rules`) that names it, so `ALL` and `rule`
/// cannot miss a variant.
macro_rules! rejections {
    ($($(#[doc = $doc:literal])* $variant:ident => $rule:ident,)*) => {
        /// Why an existing candidate was refused.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Rejection {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Rejection {
            /// Every rejection, in declaration order.
            pub const ALL: [Rejection; [$(stringify!($variant)),*].len()] = [$(Self::$variant),*];

            /// The loader rule that refused the image (docs/interfaces.md gives each
            /// rule its reason), as the probe's stderr and the remedy name it.
            pub fn rule(&self) -> &'static str {
                match self {
                    $(Self::$variant => rules::$rule,)*
                }
            }
        }
    };
}

rejections! {
    /// A link dangles, loops or passes the link limit (40, the kernel's own),
    /// or a component cannot be opened or inspected.
    Unresolvable => RESOLUTION,
    /// The resolved path is not strictly below a reviewed root and the floor.
    OutsideReviewedRoots => LOCATION,
    /// The resolved file is not a regular file (a directory, FIFO, device...).
    NotRegularFile => REGULAR_FILE,
    /// The image is not owned by root.
    ImageNotOwnedByRoot => OWNER,
    /// The image has a group or other write bit.
    ImageWritableByOthers => MODE,
    /// The image has more than one hard link.
    ImageHasOtherLinks => LINKS,
    /// A directory walked, or a link followed, is not owned by root.
    AncestorNotOwnedByRoot => OWNER,
    /// A directory walked has a group or other write bit and is not both
    /// sticky and root-owned.
    AncestorWritableByOthers => WRITABLE_DIRECTORY,
    /// A directory walked is group- or other-writable (sticky and root's),
    /// and the entry below it is not owned by root.
    EntryBelowWritableDirectoryNotOwnedByRoot => WRITABLE_DIRECTORY,
}

impl Rejection {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_names_some_rejection_and_each_has_an_explanation() {
        let named: Vec<&str> = Rejection::ALL.iter().map(Rejection::rule).collect();
        for rule in rules::ALL {
            assert!(named.contains(&rule), "{rule} names no rejection");
        }
        for rejection in Rejection::ALL {
            assert!(!rejection.explanation().is_empty());
        }
    }
}

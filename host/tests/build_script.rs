//! host/build.rs's decision about the wasm32 target (build/wasm_target.rs):
//! what it does on a machine whose toolchain lacks the target. The machine's
//! own toolchain is never changed here: the decision is a pure function of
//! what the script finds.

#[path = "../build/wasm_target.rs"]
mod wasm_target;

use std::path::PathBuf;

use wasm_target::{plan, Facts, Plan};

fn rustup_build(installed: bool) -> Facts {
    Facts {
        target_installed: installed,
        rustup_toolchain: Some("stable-x86_64-unknown-linux-gnu".into()),
        rustup: Some(PathBuf::from("/home/u/.cargo/bin/rustup")),
        no_rustup: false,
    }
}

#[test]
fn an_installed_target_is_built_with_as_it_is() {
    assert_eq!(plan(&rustup_build(true)), Plan::Build);
    // Even where rustup would refuse: nothing to add.
    let f = Facts {
        no_rustup: true,
        ..rustup_build(true)
    };
    assert_eq!(plan(&f), Plan::Build);
}

#[test]
fn a_missing_target_under_rustup_is_added_to_the_toolchain_doing_the_build() {
    assert_eq!(
        plan(&rustup_build(false)),
        Plan::AddTarget {
            rustup: PathBuf::from("/home/u/.cargo/bin/rustup"),
            toolchain: "stable-x86_64-unknown-linux-gnu".into(),
        }
    );
}

#[test]
fn a_missing_target_without_rustup_or_with_wazoo_no_rustup_builds_without_recipes_and_says_how_to_add_it(
) {
    let cases = [
        (
            Facts {
                rustup: None,
                ..rustup_build(false)
            },
            "no rustup",
        ),
        (
            Facts {
                rustup_toolchain: None,
                ..rustup_build(false)
            },
            "not run by rustup",
        ),
        (
            Facts {
                rustup_toolchain: Some(" ".into()),
                ..rustup_build(false)
            },
            "not run by rustup",
        ),
        (
            Facts {
                no_rustup: true,
                ..rustup_build(false)
            },
            "WAZOO_NO_RUSTUP",
        ),
    ];
    for (facts, why) in cases {
        match plan(&facts) {
            Plan::Without(reason) => {
                assert!(reason.contains(why), "{facts:?}: {reason}");
                assert!(
                    reason.contains("rustup target add wasm32-unknown-unknown"),
                    "{reason}"
                );
            }
            other => panic!("{facts:?}: {other:?}"),
        }
    }
}

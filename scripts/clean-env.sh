# Sourced by scripts/test.sh and scripts/demo.sh: forget the whip settings this shell may
# still export from a quickstart (`WHIP_CELL`, `WHIPPLESCRIPT_STORE`, `WHIP_AGENT`, …), so
# the tests and the demo reach their own stores and servers. `WHIP_LOG` (diagnostics) and
# `WHIP_CONFIG_DIR` (whose cluster CA to use) are kept.
for name in $(compgen -e); do
  case "$name" in
    WHIP_LOG | WHIP_CONFIG_DIR) ;;
    WHIP_* | WHIPPLESCRIPT_*) unset "$name" ;;
  esac
done
unset name

# tests/cli/helpers.bash - only for tests/cli/docs.bats, which says
# `load helpers`: the helpers live in tests/lib/helpers.bash, apart from the
# suites; drop this file once docs.bats says `load ../lib/helpers`.
source "$BATS_TEST_DIRNAME/../lib/helpers.bash"

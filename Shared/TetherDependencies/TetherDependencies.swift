// No code of its own: this target names, for libTetherKit, the package modules the programs
// and the tests import, so that they are linked into the library and nowhere else.

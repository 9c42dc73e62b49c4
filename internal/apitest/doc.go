// Package apitest holds tests of the module's public surface, as a program in another
// module sees it (issue 9): every exported name of a public package has a doc comment, no
// exported signature or field forces a caller to name a type under internal/, every public
// package has an Example, and the README's "As a library" program builds and runs in a
// separate module that requires this one through a replace directive. It has no code of
// its own.
package apitest

// Package indextest holds issue 10's acceptance tests for index builds racing other OS
// processes and crashing: a build prepared outside the table's write turn in a child
// process (the test binary re-executed with SHALE_INDEXTEST_CHILD set), held at its
// commit seam (engine.index_commit, between writing the index objects and the commit)
// by a failpoint while the parent appends, deletes covered rows, compacts covered
// fragments, commits an index of the same name, or drops the table; and the same build
// killed (SIGKILL) at every seam, then recovered. It holds only tests; each child prints
// one result line (INDEXTEST-RESULT {json}).
package indextest

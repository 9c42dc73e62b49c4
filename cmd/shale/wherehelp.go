package main

// whereHelp describes the WHERE dialect in the help of every command that takes --where
// (docs/where.md has the whole page).
const whereHelp = `--where takes a SQL WHERE expression in MySQL's dialect (as the TiDB parser reads it):
  comparisons = != <> < <= > >=, [NOT] IN (…), [NOT] BETWEEN a AND b (both ends
  included), [NOT] LIKE 'SF%' (case-sensitive), IS [NOT] NULL, AND OR NOT, arithmetic
  + - * / DIV %, CASE, COALESCE, IFNULL, parentheses; --where true selects every row.
  Unlike PostgreSQL and SQLite:
    || is OR and && is AND (not string concatenation);
    "double quotes" make a string, like 'single quotes', never a column name;
    a column named like a reserved word (key, order, range, …) or with characters other
    than letters, digits and _ needs backquotes: ` + "`key`" + ` = 'a'.
  Timestamps and dates: 'YYYY-MM-DD[ hh:mm:ss[.ffffff]]', compared as UTC; BETWEEN on a
  timestamp stops at the second end's midnight, so for whole days write
  at >= '2001-01-01' AND at < '2001-04-01'. A comparison with NULL is not true.
  See docs/where.md.`

"""The release decision as a CI job sees it: ``gate`` (sweep what is missing, decide, write the
report, JUnit XML and Markdown), its sweep step, and the decision's exit codes."""

"""The referee's workers: the candidate's supervisor and child, the judge, and what they share."""

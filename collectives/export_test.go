package collectives

// TagLink is the link measurement's tag, for the external tests to count
// its messages apart from the collectives around them.
const TagLink = tagLink

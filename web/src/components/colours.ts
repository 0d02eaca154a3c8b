// The channels' colours in charts: at least 4.5:1 on white; dashes or places tell them apart without colour.
export const SMS_COLOUR = '#1f5fae';
export const EMAIL_COLOUR = '#a4372a';

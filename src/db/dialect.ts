/** Which database a connection talks to: the one difference storage code may branch on. */
export type DialectName = 'sqlite' | 'postgres';

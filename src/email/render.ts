import MailComposer from 'nodemailer/lib/mail-composer';
import { compileTemplate, renderTemplate, type TagSources, type Template } from '../messaging/tags.ts';

/**
 * A stand-in for the email renderer, built beside this module and merged in its place: the
 * same exports, doing substitution in the subject, preheader and HTML only (no text
 * alternative, no link rewriting, no open pixel). MIME by nodemailer's composer.
 */

export interface EmailParty {
  email: string;
  displayName?: string;
}

export interface EmailContent {
  subject: string;
  preheader?: string;
  html: string;
  from: EmailParty;
  replyTo?: EmailParty;
}

export interface CompiledEmail {
  /** The original URLs of the links to track, by index. */
  links: string[];
  subject: Template;
  preheader: Template | null;
  html: Template;
  from: EmailParty;
  replyTo: EmailParty | undefined;
}

export function compileEmail(content: EmailContent, _options: { tracking: boolean }): CompiledEmail {
  return {
    links: [],
    subject: compileTemplate(content.subject),
    preheader: content.preheader === undefined ? null : compileTemplate(content.preheader),
    html: compileTemplate(content.html),
    from: content.from,
    replyTo: content.replyTo,
  };
}

export interface RecipientUrls {
  click(index: number): string;
  open: string;
  unsubscribe: string;
  unsubscribeMailto?: string;
}

const party = (p: EmailParty) => ({ name: p.displayName ?? '', address: p.email });

export function renderEmail(compiled: CompiledEmail, r: { to: string; sources: TagSources; messageId: string; urls: RecipientUrls; date: Date }): Promise<Buffer> {
  const preheader = compiled.preheader === null ? '' : `<div style="display:none">${renderTemplate(compiled.preheader, r.sources)}</div>`;
  return new MailComposer({
    from: party(compiled.from),
    replyTo: compiled.replyTo && party(compiled.replyTo),
    to: r.to,
    subject: renderTemplate(compiled.subject, r.sources),
    html: preheader + renderTemplate(compiled.html, r.sources),
    messageId: r.messageId,
    date: r.date,
    headers: { 'List-Unsubscribe': `<${r.urls.unsubscribe}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
  }).compile().build();
}

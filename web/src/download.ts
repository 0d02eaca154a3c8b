/**
 * Saves `text` as a file named `name`, made in the browser and handed over through an object URL:
 * nothing is built or kept on the server.
 */
export function saveFile(text: string, name: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement('a');
  link.href = url;
  link.download = name.replace(/[\\/:*?"<>|]/g, '_');
  document.body.append(link);
  link.click();
  link.remove();
  // The download has taken the URL once click() returns; a later revoke frees the memory.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
